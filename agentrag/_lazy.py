"""Lazy imports of heavy optional dependencies."""

from __future__ import annotations

import os
from typing import Any


def import_litellm() -> Any:
    """Import litellm without letting it fetch its price list over the network."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm
