"""What the CLI's server commands need installed, checked before they start: a missing optional
dependency is one line naming the extra to install (``pip install 'agentrag[server]'``), never a
traceback. ``agentrag serve``, ``agentrag token mint`` and ``agentrag mcp`` share it."""

from __future__ import annotations

import importlib

__all__ = ["EXTRAS", "require_extras"]

# The modules each extra brings that the commands import (pyproject.toml's optional dependencies).
EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("fastapi", "uvicorn", "jwt", "httpx", "orjson", "fastapi_offline", "opentelemetry.sdk"),
    "mcp": ("mcp",),
}


def require_extras(command: str, *extras: str) -> None:
    """SystemExit naming the extras to install when a module of one of ``extras`` cannot be
    imported (imported for real, so a broken install counts as missing too)."""
    missing: list[str] = []
    for extra in extras:
        for module in EXTRAS[extra]:
            try:
                importlib.import_module(module)
            except ImportError:
                missing.append(extra)
                break
    if missing:
        names = ",".join(extras)
        raise SystemExit(
            f"agentrag {command} needs the {' and '.join(missing)} extra{'s' if len(missing) > 1 else ''}:"
            f" pip install 'agentrag[{names}]'"
        )
