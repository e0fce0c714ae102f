"""Lazy imports of heavy optional dependencies."""

from __future__ import annotations

import logging
import os
from typing import Any

#: Loggers of litellm and the clients under it that print whole requests (the prompt, so the
#: question and the retrieved text) at DEBUG / INFO. Quietened to WARNING when their level is
#: unset, so a root logger at DEBUG does not copy prompts into an application's logs; setting a
#: level on one of them explicitly (or ``LITELLM_LOG``) is the opt-in, and is left alone.
PROMPT_ECHOING_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "openai", "httpcore", "httpx")


def import_litellm() -> Any:
    """Import litellm without letting it fetch its price list over the network."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    for name in PROMPT_ECHOING_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)
    return litellm
