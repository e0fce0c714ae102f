"""What the command groups share: opening the store, the load timing, output, shared options.

Command modules call ``common.open_store(args)`` through the module (not a from-import), so a
test can point every command at its own store with one ``monkeypatch.setattr``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentrag.store.store import Store

__all__ = [
    "FILTER_HELP",
    "FUSION_HELP",
    "PROGRESS_LINE_SECONDS",
    "SEARCH_MODES",
    "AddCommand",
    "Handler",
    "Load",
    "add_command",
    "database_url",
    "hint_for",
    "key_values",
    "open_store",
    "principal_options",
    "principal_scope",
    "print_json",
    "progress",
    "scope_of",
    "scope_options",
    "search_filters",
]

Handler = Callable[[argparse.Namespace], int]

PROGRESS_LINE_SECONDS = 30.0  # off a terminal: a progress line this often (and only past this long)

SEARCH_MODES = ("hybrid", "vector", "lexical", "lexical_sql")

FILTER_HELP = (
    "classification=, doc_ids=, date_range.start=, date_range.end= (YYYY-MM-DD) or metadata.KEY=VALUE: "
    "the keys of the Python filters; repeatable (repeated keys match any of the values)"
)
FUSION_HELP = (
    "how hybrid fuses its legs: relative_score (min-max normalised scores, equal weights; default) "
    "or rrf (reciprocal rank fusion, k=60)"
)


class AddCommand(Protocol):
    """The signature of :func:`add_command`, which every ``register(sub, add)`` receives."""

    def __call__(
        self, parent: Any, name: str, handler: Handler, help: str, json_flag: bool = True
    ) -> argparse.ArgumentParser: ...


def add_command(
    parent: Any, name: str, handler: Handler, help: str, json_flag: bool = True
) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` to ``parent`` (a subparsers action), run by ``handler``."""
    p: argparse.ArgumentParser = parent.add_parser(name, help=help, description=help)
    p.set_defaults(handler=handler)
    if json_flag:
        p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def scope_options(parser: argparse.ArgumentParser) -> None:
    """--tenant, --workspace, --session."""
    for flag in ("--tenant", "--workspace", "--session"):
        parser.add_argument(flag)


def principal_options(parser: argparse.ArgumentParser) -> None:
    """--user, --group (repeatable), --admin, --include-shared: who is asking (docs/how-to/permissions.md)."""
    parser.add_argument(
        "--user", help="who is asking: acl=True collections return what is granted to this user"
    )
    parser.add_argument("--group", action="append", help="a group the user belongs to (repeatable)")
    parser.add_argument("--admin", action="store_true", help="read every document of acl=True collections")
    parser.add_argument(
        "--include-shared",
        action="store_true",
        help="with --session: the session's uploads and the shared documents",
    )


def principal_scope(args: argparse.Namespace, scope: Any) -> Any:
    """``scope`` with the principal of --user / --group / --admin (and --include-shared) added."""
    import dataclasses

    from agentrag.scope import Principal, Scope

    user, groups, admin = (
        getattr(args, "user", None),
        getattr(args, "group", None),
        getattr(args, "admin", False),
    )
    shared = getattr(args, "include_shared", False)
    if not (user or groups or admin or shared):
        return scope
    principal = Principal(user=user, groups=groups or [], admin=admin) if user or groups or admin else None
    return dataclasses.replace(scope or Scope(), principal=principal, include_shared=shared)


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str, ensure_ascii=False))


def key_values(pairs: Sequence[str] | None, flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"agentrag: {flag} takes key=value, got {pair!r}")
        out[key.strip()] = value
    return out


def database_url(args: argparse.Namespace) -> str | None:
    """--database-url, else $AGENTRAG_DATABASE_URL, else the embedded server, left running between
    calls (an idle watchdog stops it; ``agentrag db stop`` at once)."""
    import os

    url = getattr(args, "database_url", None) or os.environ.get("AGENTRAG_DATABASE_URL")
    if url:
        return str(url)
    from agentrag.store.server import embedded_url

    return embedded_url(keep_running=True)


def open_store(args: argparse.Namespace) -> Store:
    from agentrag.store.store import Store

    return Store(database_url(args))


def scope_of(args: argparse.Namespace) -> Any:
    from agentrag.scope import Scope

    if args.tenant or args.workspace or args.session:
        return principal_scope(
            args, Scope(tenant=args.tenant, workspace=args.workspace, session=args.session)
        )
    return principal_scope(args, None)


def search_filters(pairs: Sequence[str] | None) -> dict[str, Any] | None:
    """``--filter`` pairs -> a filters dict, with the keys of the Python ``Filters`` model."""
    if not pairs:
        return None  # no filters model (pydantic) on a search without --filter
    from agentrag.retrieval.filters import parse_filter_pairs

    return parse_filter_pairs(pairs)


class Load:
    """Time spent before the work: connecting (server, pool, schema check) and loading the model.

    The model loads in a thread while the database connects (ONNX Runtime builds its session in
    native code), so the load's wall time is about the longer of the two, not their sum.
    """

    def __init__(self) -> None:
        self.database_ms = 0.0
        self.model_ms = 0.0
        self.wall_ms = 0.0

    def store(self, args: argparse.Namespace, *, needs_model: bool) -> Store:
        import threading
        import time

        from agentrag.embedders import LocalEmbedder

        failure: list[BaseException] = []

        def load_model() -> None:
            t = time.perf_counter()
            try:
                LocalEmbedder().load()  # the store's default embedder shares the loaded model
            except BaseException as exc:  # re-raised below, in the main thread
                failure.append(exc)
            self.model_ms = (time.perf_counter() - t) * 1000

        start = time.perf_counter()
        thread = threading.Thread(target=load_model, daemon=True) if needs_model else None
        if thread is not None:
            thread.start()
        try:
            store = open_store(args)
        finally:
            self.database_ms = (time.perf_counter() - start) * 1000
            if thread is not None:
                thread.join()
        if failure:
            raise failure[0]
        self.wall_ms = (time.perf_counter() - start) * 1000
        return store

    def to_dict(self) -> dict[str, float]:
        return {
            "total": round(self.wall_ms, 1),
            "database": round(self.database_ms, 1),
            "model": round(self.model_ms, 1),
        }

    def line(self, work: str, work_ms: float) -> str:
        parts = f"database {self.database_ms:.0f}" + (f", model {self.model_ms:.0f}" if self.model_ms else "")
        return f"load {self.wall_ms:.0f} ms ({parts}, in parallel)  {work} {work_ms:.1f} ms"


@contextlib.contextmanager
def progress(
    total: int, enabled: bool, *, desc: str | None = None, unit: str = "doc", leave: bool = True
) -> Iterator[Callable[[Any], None]]:
    """The ``on_progress`` callback of a long command, moving one step per event (not for ingest's
    "writing" events). When ``enabled``: a tqdm bar on a terminal's stderr; off a terminal (make,
    CI, a log), a plain line on stderr every ``PROGRESS_LINE_SECONDS`` once the work has taken that
    long, so a 15-minute ingest is never silent. Closed on the way out."""
    import time

    bar = None
    if enabled and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=leave)
    lines = enabled and bar is None
    start = time.monotonic()
    state = {"done": 0, "said": start}

    def advance(event: Any) -> None:
        if getattr(event, "status", None) == "writing":
            return
        if bar is not None:
            bar.update(1)
        state["done"] += 1
        now = time.monotonic()
        if lines and now - state["said"] >= PROGRESS_LINE_SECONDS:
            state["said"] = now
            share = f" ({100 * state['done'] / total:.0f}%)" if total else ""
            print(
                f"{desc or 'progress'}: {state['done']}/{total or '?'} {unit}s{share}, {now - start:.0f} s",
                file=sys.stderr,
                flush=True,
            )

    try:
        yield advance
    finally:
        if bar is not None:
            bar.close()


def hint_for(args: argparse.Namespace, exc: Exception) -> str:
    """The fix a command's error suggests beyond the library's message (which names what is wrong)."""
    from agentrag.errors import CollectionNotFoundError

    if isinstance(exc, CollectionNotFoundError) and args.command != "collections":
        if args.command == "ingest":
            name = getattr(args, "collection", None) or "NAME"
            return f"\n  create it as you ingest: agentrag ingest ... -c {name} --create --description '...'"
        return (
            "\n  create one with: agentrag collections create NAME --description '...'"
            " (or point AGENTRAG_DATA_DIR / --database-url at the database that holds it)"
        )
    return ""
