"""Where the benchmarks find their data: no machine's absolute path in the project.

SciFact (BEIR format) is read from ``AGENTRAG_BEIR_PATH`` when it is set, else from
``../shared/data/beir/scifact`` next to the checkout (the team's layout); every benchmark's
``--data`` overrides both. tests/conftest.py resolves ``SCIFACT`` the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def scifact_path() -> Path:
    """The SciFact folder: ``$AGENTRAG_BEIR_PATH``, else ``<checkout>/../shared/data/beir/scifact``."""
    configured = os.environ.get("AGENTRAG_BEIR_PATH")
    if configured:
        return Path(configured).expanduser()
    return CHECKOUT.parent / "shared" / "data" / "beir" / "scifact"
