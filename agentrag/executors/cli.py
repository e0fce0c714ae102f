"""``agentrag ingest PATH --ray [ADDRESS]`` (registered by agentrag.cli through an entry point).

Adds the Ray options to the library's ``ingest`` command and hands it a factory that builds the
executor from them; the library's CLI never imports this package.
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Callable
from typing import Any

from agentrag.errors import InvalidInputError


def register(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``--ray [ADDRESS]``, ``--ray-actors`` and ``--ray-gpus-per-actor`` to ``agentrag ingest``."""
    ingest: argparse.ArgumentParser | None = sub.choices.get("ingest")
    if ingest is None:  # pragma: no cover - the library always has ingest
        return
    group = ingest.add_argument_group("Ray (the ray extra)")
    group.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="read, chunk and embed on Ray: no ADDRESS or 'local' starts a local instance, "
        "'auto' or ray://host:10001 joins a cluster; writes stay in this process",
    )
    group.add_argument("--ray-actors", type=int, default=1, metavar="N", help="embedding actors (default 1)")
    group.add_argument(
        "--ray-gpus-per-actor", type=float, default=0.0, metavar="G", help="GPUs per embedding actor"
    )
    ingest.set_defaults(executor_factory=executor_from_args)


def executor_from_args(args: argparse.Namespace) -> Any:
    """The RayExecutor the options ask for, or None without ``--ray``."""
    if args.ray is None:
        return None
    if importlib.util.find_spec("ray") is None:
        raise InvalidInputError("--ray needs Ray: pip install 'agentrag[ray]'")
    from agentrag.executors.ray import RayExecutor

    return RayExecutor(
        args.ray, actors=args.ray_actors, gpus_per_actor=args.ray_gpus_per_actor, progress=False
    )
