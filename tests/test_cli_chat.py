"""``agentrag chat``: the terminal loop over a real store, scripted input, citations per turn."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from agentrag.chat import RAGConfig
from agentrag.cli import build_parser
from agentrag.cli.chat_terminal import ChatSession, link_samples, run
from agentrag.scope import Scope
from tests.conftest import SAMPLES
from tests.pipeline_fixtures import NAMES, sample_store

__all__ = ["sample_store"]


def scripted(lines: list[str]) -> tuple[object, list[str]]:
    feed: Iterator[str] = iter(lines)
    out: list[str] = []

    def read(prompt: str) -> str:
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    return read, out


@pytest.fixture
def demo_store(fake_embedder):  # type: ignore[no-untyped-def]
    """A database of its own for ``chat --samples``: the demo's collections (``demo_support``, ...)
    must not reach sample_store, whose pipeline tests search every collection."""
    from agentrag.store.store import Store
    from tests.conftest import fresh_database

    with fresh_database("agentrag_chat") as url:
        store = Store(url, embedder=fake_embedder)
        yield store
        store.close()


def test_chat_loop_answers_follow_ups_with_citations_in_a_session(demo_store, tmp_path) -> None:
    session = f"s-{uuid.uuid4().hex[:6]}"
    names = link_samples(demo_store, session, SAMPLES)
    assert names == [f"demo_{name}" for name in NAMES]  # the demo's copy, apart from the user's collections
    private = tmp_path / "zorblat.md"
    private.write_text("# Zorblat\n\nThe zorblat quarterly review happens on the first Monday of March.\n")
    read, out = scripted(
        [
            "How do I recover a deleted note?",
            "how long is it kept in the trash?",
            "hello",
            "/quit",
            "never read",
        ]
    )
    config = RAGConfig(collections=tuple(names), mode="lexical")
    assert (
        run(demo_store, config=config, scope=Scope(session=session), llm=None, read=read, write=out.append)
        == 0
    )
    text = "\n".join(out)
    turns = out[1:]
    assert "sources:" in turns[0] and "recover-deleted-note.md" in turns[0] and "(cited)" in turns[0]
    assert "(searched: How long is a deleted note kept in the trash?)" in turns[1]
    assert "sources:" in turns[1]
    assert "did not need a document search" in turns[2] and "sources:" not in turns[2]
    assert "never read" not in text

    # /add: a file visible to this session only (the scope is enforced in SQL)
    uploads = RAGConfig(collections=("chat_uploads",), mode="lexical")
    mine = ChatSession(demo_store, config=uploads, scope=Scope(session=session))
    try:
        assert "1 added" in mine.add(str(private))
        ctx, result = mine.ask("When is the zorblat quarterly review?")
        assert [c["source"] for c in result.citations] == ["zorblat.md"]
        assert "first Monday of March" in (ctx.answer_text or "")
        theirs = ChatSession(demo_store, config=uploads, scope=Scope(session=f"s-{uuid.uuid4().hex[:6]}"))
        _ctx, result = theirs.ask("When is the zorblat quarterly review?")
        assert result.citations == () and result.grounded is False
    finally:
        demo_store.delete_collection("chat_uploads")


def test_chat_reset_forgets_the_conversation(sample_store) -> None:
    read, out = scripted(["How do I recover a deleted note?", "/reset", "how long is it kept?"])
    run(
        sample_store,
        config=RAGConfig(collections=tuple(NAMES), mode="lexical"),
        scope=None,
        llm=None,
        read=read,
        write=out.append,
    )
    assert "(conversation forgotten)" in out
    assert "(searched:" not in out[-1]


def test_chat_command_parses() -> None:
    args = build_parser().parse_args(
        ["chat", "--samples", "--session", "s1", "--llm", "gpt-4o-mini", "--rewrite"]
    )
    assert args.samples and args.session == "s1" and args.llm == "gpt-4o-mini" and args.rewrite
    with pytest.raises(SystemExit):
        build_parser().parse_args(["chat", "--mode", "semantic"])
