"""``agentrag chat``: an interactive terminal chat over your collections, with citations per turn.

Each turn runs :func:`agentrag.chat.retrieve_turn` (gate -> condense -> search -> rerank ->
context) over the conversation so far, then ``answer()`` over the turn's ranked hits: the same
candidates, weighed the same way, as ``gate | condense | search | rerank | answer`` in the library
(not only the chunks packed into the reply's context). The sources listed are the ones the answer
read. Without an LLM everything is local (extractive answers); with ``--llm`` or ``AGENTRAG_LLM``
any litellm model decides and answers.

``--samples`` ingests the Lumen sample corpus and links it to the chat's session, so a session
scope is in force from the first turn: ``/add PATH`` ingests a file visible to this session only.
Commands: ``/add PATH``, ``/reset`` (forget the conversation), ``/quit``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrag.cli.common import SEARCH_MODES, AddCommand

if TYPE_CHECKING:  # agentrag.chat (pydantic) is imported when a chat starts, not to build the parser
    from agentrag.chat import RAGConfig, RAGResult
    from agentrag.context import Context
    from agentrag.scope import Scope
    from agentrag.store.store import Store

__all__ = ["ChatSession", "link_samples", "register", "render_turn", "run"]

UPLOADS = "chat_uploads"


def link_samples(store: Store, session: str, samples: Path) -> list[str]:
    """Ingest the sample corpus (a no-op when present: the demo's copy in ``demo_product_docs``,
    ``demo_support`` and ``demo_api``, tenant ``demo``) and link its documents to ``session``."""
    from agentrag.samples import ingest_samples

    names = ingest_samples(store, samples)
    for name in names:
        for document in store.documents(collection=name, limit=10_000):
            store.link_session(document.id, session)
    return names


class ChatSession:
    """One conversation: its messages, scope, config and model; :meth:`ask` runs a turn."""

    def __init__(
        self, store: Store, *, config: RAGConfig, scope: Scope | None = None, llm: Any = None
    ) -> None:
        self.store = store
        self.config = config
        self.scope = scope
        self.llm = llm
        self.messages: list[dict[str, str]] = []

    def ask(self, text: str) -> tuple[Context, RAGResult]:
        from agentrag.chat import retrieve_turn
        from agentrag.steps.answer import answer

        messages = [*self.messages, {"role": "user", "content": text}]
        result = retrieve_turn(self.store, messages, config=self.config, scope=self.scope, llm=self.llm)
        assert result.ctx is not None
        ctx = answer(result.ctx)  # the pipeline's answer step over the turn's ranked hits
        reply = ctx.answer_text or (result.guidance or "")
        self.messages = [*messages, {"role": "assistant", "content": reply}]
        return ctx, result

    def add(self, path: str, collection: str = UPLOADS) -> str:
        self.store.create_collection(collection, description="files added during a chat", exist_ok=True)
        session = self.scope.session if self.scope else None
        workspace = self.scope.workspace if self.scope else None
        tenant = self.scope.tenant if self.scope else None
        report = self.store.ingest(
            path, collection=collection, session=session, workspace=workspace, tenant=tenant
        )
        if self.config.collections is not None and collection not in self.config.collections:
            self.config = self.config.model_copy(
                update={"collections": (*self.config.collections, collection)}
            )
        return str(report)


def render_turn(ctx: Context, result: RAGResult) -> str:
    lines = []
    if ctx.original_question and ctx.question != ctx.original_question:
        lines.append(f"  (searched: {ctx.question})")
    if ctx.error is not None:
        lines.append(f"error: {type(ctx.error).__name__}: {ctx.error}")
        return "\n".join(lines)
    lines.append(ctx.answer_text or "")
    citations = _sources(ctx, result)
    if citations:
        lines.append("sources:")
        cited = set(ctx.citations)
        for i, c in enumerate(citations, 1):
            where = c["source"] or c["document_id"]
            if c.get("locator"):
                from agentrag.readers.locators import format_locator

                where += f" ({format_locator(c['locator'])})"
            elif c["section"]:
                where += f" § {c['section']}"
            mark = "  (cited)" if c["label"] in cited else ""
            lines.append(f"  {i}. [{c['label']}] {c['collection']}:{where}{mark}")
    elif result.mode not in ("skipped", "disabled") and result.guidance:
        lines.append(f"({result.guidance})")
    mode, grounded = _answered(ctx, result)
    lines.append(f"  [{mode}, grounded: {'yes' if grounded else 'no'}]")
    return "\n".join(lines)


def _sources(ctx: Context, result: RAGResult) -> tuple[dict[str, Any], ...]:
    """What the answer read (its context and any chunk it quoted beyond it), or without an answer
    over retrieved chunks, the turn's context."""
    from agentrag.chat import citation_of

    if result.mode in ("skipped", "disabled", "failed"):
        return result.citations
    return tuple(citation_of(h) for h in ctx.context_used)


def _answered(ctx: Context, result: RAGResult) -> tuple[str, bool]:
    """The turn's mode and groundedness as the answer step decided them (an abstention included)."""
    if result.mode in ("skipped", "disabled", "failed") or ctx.mode is None:
        return result.mode, result.grounded
    return ctx.mode, bool(ctx.grounded)


def run(
    store: Store,
    *,
    config: RAGConfig,
    scope: Scope | None,
    llm: Any,
    read: Callable[[str], str] = input,
    write: Callable[[str], None] = print,
) -> int:
    session = ChatSession(store, config=config, scope=scope, llm=llm)
    where = f"scope: {scope!r}" if scope else "no scope"
    model = llm or "none (local strategies, extractive answers)"
    write(f"agentrag chat ({where}; model: {model}). /add PATH, /reset, /quit")
    while True:
        try:
            line = read("you> ").strip()
        except EOFError:
            write("")
            return 0
        if not line:
            continue
        if line in ("/quit", "/exit"):
            return 0
        if line == "/reset":
            session.messages = []
            write("(conversation forgotten)")
            continue
        if line.startswith("/add "):
            write(session.add(line[5:].strip()))
            continue
        ctx, result = session.ask(line)
        write(render_turn(ctx, result))


def cmd_chat(args: argparse.Namespace) -> int:
    """The ``agentrag chat`` handler."""
    import os
    import uuid

    from agentrag.chat import RAGConfig
    from agentrag.samples import find_samples
    from agentrag.scope import Scope
    from agentrag.store.store import Store

    store = Store(getattr(args, "database_url", None))
    session = args.session
    collections = list(args.collection or [])
    if args.samples:
        session = session or f"chat-{uuid.uuid4().hex[:8]}"
        names = link_samples(store, session, find_samples(None))
        collections = collections or names
    scope = None
    if args.tenant or args.workspace or session:
        # the session's own uploads (/add) and the shared documents, as one ranking
        scope = Scope(
            tenant=args.tenant, workspace=args.workspace, session=session, include_shared=bool(session)
        )
    config = RAGConfig(
        collections=tuple(collections) or None,
        mode=args.mode,
        enable_query_rewrite=args.rewrite,
        enable_llm_rerank=args.llm_rerank,
        max_chunks=args.max_chunks,
    )
    llm = args.llm or os.environ.get("AGENTRAG_LLM") or None
    return run(store, config=config, scope=scope, llm=llm, write=lambda s: print(s, flush=True))


def register(sub: Any, add: AddCommand) -> None:
    p = add(sub, "chat", cmd_chat, "chat in the terminal: follow-ups in context, citations per turn", False)
    p.add_argument(
        "--samples", action="store_true", help="chat over the sample corpus, linked to the session"
    )
    p.add_argument("--collection", "-c", action="append", help="collection to search (repeatable)")
    p.add_argument("--llm", help="model name for litellm (default: $AGENTRAG_LLM; none: local strategies)")
    p.add_argument("--mode", default="hybrid", choices=list(SEARCH_MODES))
    p.add_argument("--rewrite", action="store_true", help="search 1-2 rewrites of each question too")
    p.add_argument("--llm-rerank", action="store_true", help="let the LLM order the chunks (needs --llm)")
    p.add_argument("--max-chunks", type=int, default=6, help="chunks in the context per turn (default 6)")
    p.add_argument("--tenant")
    p.add_argument("--workspace")
    p.add_argument("--session", help="session scope (with --samples: default a new session id)")
