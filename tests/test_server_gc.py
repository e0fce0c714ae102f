"""``create_app(freeze_gc=True)`` (what ``agentrag serve`` runs) freezes the process once started."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest


@pytest.mark.parametrize("freeze", [False, True])
def test_the_lifespan_freezes_the_collector_only_when_asked(store: Any, freeze: bool) -> None:
    from agentrag.server import create_app
    from agentrag.server.config import ServerConfig

    app = create_app(store, config=ServerConfig(jwt_secret="s" * 40), freeze_gc=freeze)
    gc.unfreeze()
    try:

        async def started() -> int:
            async with app.router.lifespan_context(app):
                return gc.get_freeze_count()

        frozen = asyncio.run(started())
        assert (frozen > 0) is freeze
    finally:
        gc.unfreeze()  # the rest of the test session collects as usual
