"""``agentrag mcp``: the MCP server over stdio, for desktop agent hosts (the ``mcp`` extra).

The host starts the process and speaks MCP on its stdin / stdout (logs go to stderr). One process
serves one caller: a tenant (``--tenant``; without it, the documents ingested without a tenant) and
a principal (``--user``, ``--group``: the grants ``acl=True`` collections check). The tools run
through the same gateway as ``agentrag serve``'s interfaces (:mod:`agentrag.server.gateway`), with
this one caller in place of a token and its admission.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["register"]


def cmd_mcp(args: argparse.Namespace) -> int:
    from agentrag.server.extras import require_extras

    require_extras("mcp", "mcp", "server")  # its tools run on the server's modules
    import agentrag as ar
    from agentrag.server.app import build_store
    from agentrag.server.config import ServerConfig
    from agentrag.server.gateway import Gateway
    from agentrag.server.mcp_server import build_server

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    config = ServerConfig.from_env(
        database_url=getattr(args, "database_url", None),
        embedder=args.embedder,
        llm=args.llm,
        llm_api_base=args.llm_api_base,
        default_collections=args.collections,
    )
    store = build_store(config)
    llm = (
        ar.LiteLLM(config.llm, api_base=config.llm_api_base, api_key=config.llm_api_key)
        if config.llm
        else None
    )
    collections = [c for c in (config.default_collections or "").split(",") if c] or None
    gateway = Gateway(store, default_collections=collections)
    caller = gateway.local(args.tenant, args.user, args.group or ())
    server = build_server(gateway, caller_of=lambda ctx: caller, llm=llm)
    try:
        server.run("stdio")
    finally:
        store.close()
    return 0


def register(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``mcp``."""
    p = add(sub, "mcp", cmd_mcp, "serve the knowledge base to an MCP host over stdio", json_flag=False)
    p.add_argument("--tenant", help="the tenant whose documents the tools see (default: no tenant scope)")
    p.add_argument("--user", help="the user whose grants acl=True collections check (default: none)")
    p.add_argument(
        "--group", action="append", help="a group of that user (repeat for several; default: none)"
    )
    p.add_argument("--collections", help="comma-separated collections searched by default")
    p.add_argument("--embedder", help="query embedder: local (default) or fake[:DIMS] (tests)")
    p.add_argument("--llm", help="litellm model for ask (default: none, extractive answers)")
    p.add_argument("--llm-api-base", help="API base URL of the --llm model")
