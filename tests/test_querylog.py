"""The opt-in query log: written off the hot path; a failed write never touches the answer."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from agentrag import cli, querylog
from agentrag.errors import InvalidInputError
from agentrag.steps import new
from agentrag.store.store import Store
from agentrag.testing import FakeEmbedder, FakeLLM
from tests.conftest import SAMPLES
from tests.grounded_support import QUESTION


def test_answer_writes_the_row_when_opted_in(store: Store, support: str) -> None:
    ids = [h.chunk_id for h in new(QUESTION, store=store, collections=support).search().hits]
    fake = FakeLLM([f"Use the trash [{ids[0]}]."], model="fake-model")
    ctx = new(QUESTION, store=store, llm=fake, collections=support, query_log=True).search().rerank().answer()
    querylog.flush(store)
    rows = {row.id: row for row in store.query_logs(limit=50)}
    row = rows[ctx.query_id]
    assert row.question == QUESTION
    assert row.answer == ctx.answer_text
    assert row.chunk_ids == tuple(h.chunk_id for h in ctx.hits)
    assert row.collections == (support,)
    assert row.mode == "full" and row.grounded is True
    assert row.model == "fake-model"
    assert (row.input_tokens, row.output_tokens) == (ctx.tokens["input"], ctx.tokens["output"])
    assert {"retrieval", "context", "generation", "total"} <= set(row.latency_ms)
    assert row.created_at is not None


def test_nothing_is_written_without_opting_in(store: Store, support: str) -> None:
    ctx = new(QUESTION, store=store, collections=support).search().answer()
    querylog.flush()
    assert ctx.query_id not in {row.id for row in store.query_logs(limit=1000)}


def test_query_log_needs_a_store() -> None:
    with pytest.raises(InvalidInputError):
        new(QUESTION, query_log=True)
    with pytest.raises(InvalidInputError):
        querylog.query_logs(Store.__new__(Store), limit=0)


@pytest.fixture
def scratch_store(database_url: str) -> Iterator[Store]:
    """A fresh database of its own, so its query_logs table can be dropped."""
    base = make_url(database_url)
    name = f"agentrag_qlog_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    s = Store(base.set(database=name).render_as_string(hide_password=False), embedder=FakeEmbedder(64))
    yield s
    querylog.flush(s)
    s.close()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def test_a_failed_write_only_warns(scratch_store: Store, caplog: pytest.LogCaptureFixture) -> None:
    scratch_store.create_collection("support", description="support")
    scratch_store.ingest(SAMPLES / "support" / "recover-deleted-note.md", collection="support")
    with scratch_store.engine.begin() as conn:
        conn.execute(text("DROP TABLE agentrag.query_logs"))
    question = "How do I recover a deleted note QLOG-SECRET-7731?"
    ids = [h.chunk_id for h in new(question, store=scratch_store, collections="support").search().hits]
    reply = f"Restore it from the trash [{ids[0]}]."
    with caplog.at_level(logging.WARNING, logger="agentrag.querylog"):
        ctx = new(question, store=scratch_store, llm=FakeLLM([reply]), collections="support", query_log=True)
        ctx = ctx.search().rerank().answer()
        querylog.flush(scratch_store)
    # the answer is the model's, untouched by the failed write (the unknown code in the question
    # may lower the evidence's confidence: low-confidence is still an answer)
    assert ctx.ok and ctx.answer_text == reply and ctx.grounded is True
    assert ctx.mode in ("full", "low-confidence") and not ctx.degradations
    warnings = [r for r in caplog.records if r.name == "agentrag.querylog"]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    message = warnings[0].getMessage()
    assert "could not write query log" in message and "UndefinedTable" in message
    assert "QLOG-SECRET-7731" not in caplog.text  # the statement's parameters are not logged


def test_writes_happen_off_the_calling_thread(store: Store, support: str) -> None:
    import threading

    seen: list[str] = []
    writer = querylog.writer_for(store)
    original = writer._write

    def spy(entry: Any) -> bool:
        seen.append(threading.current_thread().name)
        return original(entry)

    writer._write = spy  # type: ignore[method-assign]
    try:
        new(QUESTION, store=store, collections=support, query_log=True).search().answer()
        querylog.flush(store)
    finally:
        writer._write = original  # type: ignore[method-assign]
    assert seen and seen[0].startswith("agentrag-querylog")


def test_cli_log(store: Store, support: str, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    ctx = new(QUESTION, store=store, collections=support, query_log=True).search().answer()
    querylog.flush(store)
    monkeypatch.setattr(cli.common, "open_store", lambda args: store)
    assert cli.main(["log", "--limit", "1", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["id"] == ctx.query_id and row["question"] == QUESTION
    assert cli.main(["log", "-n", "1"]) == 0
    out = capsys.readouterr().out
    assert ctx.query_id in out and f"Q: {QUESTION}" in out
