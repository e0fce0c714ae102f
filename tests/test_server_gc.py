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


def test_the_lifespan_sets_the_switch_interval_and_restores_it(store: Any) -> None:
    import sys

    from agentrag.server import create_app
    from agentrag.server.config import ServerConfig

    app = create_app(store, config=ServerConfig(jwt_secret="s" * 40), switch_interval=0.02)
    before = sys.getswitchinterval()
    assert before != 0.02

    async def started() -> float:
        async with app.router.lifespan_context(app):
            return sys.getswitchinterval()

    assert asyncio.run(started()) == 0.02
    assert sys.getswitchinterval() == before  # restored at shutdown


@pytest.mark.parametrize("bad", [0, -0.01, "0.02", True])
def test_a_switch_interval_that_is_not_a_positive_number_is_refused_at_once(store: Any, bad: Any) -> None:
    from agentrag.errors import InvalidInputError
    from agentrag.server import create_app
    from agentrag.server.config import ServerConfig

    with pytest.raises(InvalidInputError, match="switch_interval"):
        create_app(store, config=ServerConfig(jwt_secret="s" * 40), switch_interval=bad)


def test_agentrag_serve_builds_its_app_with_the_serving_switch_interval(monkeypatch: Any) -> None:
    from agentrag.server import app as server_app

    seen: dict[str, Any] = {}
    monkeypatch.setenv("AGENTRAG_JWT_SECRET", "s" * 40)
    monkeypatch.setattr(server_app, "build_store", lambda config: "the store")
    monkeypatch.setattr(server_app, "create_app", lambda store, **kwargs: seen.update(kwargs, store=store))
    server_app.app_from_env()
    assert seen["store"] == "the store" and seen["freeze_gc"] is True
    assert seen["switch_interval"] == server_app.SERVE_SWITCH_INTERVAL_S == 0.02
