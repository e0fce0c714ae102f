"""Acceptance for issue #13: a new user's first session, driven through the CLI as subprocesses.

A fresh embedded PostgreSQL in its own data directory (as on a fresh machine), the real local
embedder, the sample corpus plus one broken file: create a collection, ingest, search, ask, make
the typical mistakes (a typo'd filter, the old filter names, an unknown collection, an empty
collection, a session scope over shared documents) and check what the user reads.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, SAMPLES

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    data = tmp_path_factory.mktemp("first-session")
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTRAG_DATABASE_URL", "AGENTRAG_LLM")}
    env["AGENTRAG_DATA_DIR"] = str(data)
    agentrag = str(Path(sys.executable).parent / "agentrag")

    def run(*args: str, code: int = 0, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [agentrag, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600, input=stdin
        )
        assert done.returncode == code, (
            f"agentrag {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
        )
        return done

    run.env = env  # type: ignore[attr-defined]
    run.data = data  # type: ignore[attr-defined]
    yield run
    if "stop" in run("db", "--help").stdout:  # a server kept running between calls
        run("db", "stop", "--force")
    shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="module")
def demo(cli) -> str:  # type: ignore[no-untyped-def]
    """The output of ``agentrag demo``, run once for the module in its data directory (a test that needs the
    demo's collections takes this; a second run is the demo test's own)."""
    return str(cli("demo").stdout)


def test_a_first_session(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = cli("collections", "list").stdout
    assert "no collections yet: agentrag collections create NAME" in out

    out = cli("collections", "create", "support", "--description", "Support answers").stdout
    assert out.startswith("created Collection(")

    # ingest a folder with one broken file: the others go in, the failure is named, exit code 1
    folder = tmp_path / "support"
    shutil.copytree(SAMPLES / "support", folder)
    (folder / "broken.md").write_text("---\ndate: someday\n---\n\nA broken date.\n")
    done = cli("ingest", str(folder), "--collection", "support", code=1)
    assert "support: 12 added, 0 replaced, 0 unchanged, 1 failed" in done.stdout
    assert "failed: broken.md: metadata 'date' must be an ISO date" in done.stdout
    assert "12 added" not in cli("ingest", str(folder / "recover-deleted-note.md"), "-c", "support").stdout

    out = cli("search", "recover a deleted note from the trash", "--collection", "support").stdout
    assert re.search(r"SearchResult\('recover a deleted note from the trash' in support: 5 hits", out)
    assert "recover-deleted-note.md" in out.split("\n", 3)[3]  # among the first hits

    done = cli("ask", "How do I recover a deleted note?", "--collection", "support")
    answer, _, rest = done.stdout.partition("\nSources:\n")
    sentences = re.split(r"(?<=\]) ", answer.strip())
    assert sentences and all(
        re.fullmatch(r"[A-Z*`].*[.!?][*_`\"')]* \[chk_[0-9a-f]{16}\]", s) for s in sentences
    )
    assert ",." not in answer and "recover-deleted-note.md" in rest
    assert re.search(r"mode: full  grounded: yes  (confidence: [\d.]+  )?sources: \d+", rest)

    # a typo'd filter, and the filter names the CLI used to have
    err = cli("search", "refund", "-c", "support", "--filter", "clasification=public", code=2).stderr
    assert "agentrag: error: unknown filter key 'clasification' (did you mean 'classification'?)" in err
    err = cli("ask", "refund?", "-c", "support", "--filter", "date_from=2025-01-01", code=2).stderr
    assert "did you mean 'date_range.start'?" in err
    out = cli(
        "search", "refund", "-c", "support", "--mode", "lexical", "--filter", "classification=secret"
    ).stdout
    assert "0 hits" in out and "no hits: the filters exclude all 12 documents" in out

    # a collection that does not exist, and one that is empty
    err = cli("ask", "How do I recover a deleted note?", "-c", "suport", code=2).stderr
    assert "no collection named 'suport' in the embedded database in " in err  # the database searched
    assert "(did you mean 'support'?); collections in this database: 'support'" in err
    cli("collections", "create", "drafts")
    out = cli("search", "recover a deleted note", "-c", "drafts").stdout
    assert "no hits: collection 'drafts' is empty: nothing has been ingested into it in this database" in out
    out = cli("ask", "How do I recover a deleted note?", "-c", "drafts").stdout
    assert (
        "I could not find anything relevant to this question in drafts: collection 'drafts' is empty" in out
    )
    assert re.search(r"grounded: no  (confidence: [\d.]+  )?sources: 0", out)

    # a session scope over documents ingested without one
    out = cli("search", "refund", "-c", "support", "--mode", "lexical", "--session", "chat-1").stdout
    assert "no hits: nothing in collection 'support' is visible to the scope (session='chat-1')" in out


def test_a_misspelt_or_missing_collection_names_the_database_the_close_names_and_the_fix(cli) -> None:  # type: ignore[no-untyped-def]
    data = cli.data
    err = cli("ingest", str(SAMPLES / "support"), "-c", "handbook", code=2).stderr
    assert f"no collection named 'handbook' in the embedded database in {data} (AGENTRAG_DATA_DIR)" in err
    assert "agentrag ingest ... -c handbook --create --description '...'" in err  # the fix
    cli("collections", "create", "handbook", "--description", "The handbook")
    err = cli("search", "refund", "-c", "handbok", code=2).stderr
    assert "no collection named 'handbok'" in err and "(did you mean 'handbook'?)" in err
    assert "collections in this database: " in err and "'handbook'" in err
    assert "AGENTRAG_DATA_DIR / --database-url" in err  # where else to look


def test_collections_delete_asks_first_and_needs_yes_off_a_terminal(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("collections", "create", "scratch")
    (tmp_path / "a.md").write_text("# A\n\nSomething worth keeping.\n")
    cli("ingest", str(tmp_path), "-c", "scratch")
    err = cli("collections", "delete", "scratch", code=2, stdin="y\n").stderr  # stdin is no terminal
    assert (
        "not deleting collection 'scratch' and its 1 documents (1 chunks) from the embedded database" in err
    )
    assert "pass --yes" in err
    assert "scratch" in cli("collections", "list").stdout  # still there
    assert "deleted collection 'scratch'" in cli("collections", "delete", "scratch", "--yes").stdout
    cli("collections", "create", "empty")
    assert "deleted collection 'empty'" in cli("collections", "delete", "empty").stdout  # nothing to lose


def test_demo_then_serve_demo_ingest_the_samples_once_into_the_demo_collections(cli, demo: str) -> None:  # type: ignore[no-untyped-def]
    import httpx

    from tests.server_support import free_port

    out = demo  # the first run in this data directory
    assert "demo_product_docs: 12 added" in out and "Q: How do I paginate" in out
    assert "Loading weights" not in out + cli("demo").stdout  # a second run: nothing new, no bar
    port = free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "agentrag"), "serve", "--demo", "--port", str(port)],
        cwd=REPO, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not any("ready at http" in line for line in lines):
            line = server.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            lines.append(line)
        said = "".join(lines)
        printed = re.search(r"Bearer ([^']+)'.*?-d '([^']+)'.*?(http://\S+/search)", said, re.S)
        assert printed, said
        token, body, url = printed.groups()  # the printed curl, as a user would paste it
        response = httpx.post(url, content=body, timeout=120, headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert "demo token" in said, said
    names = ("demo_product_docs", "demo_support", "demo_api")
    for name in names:  # the demo's documents, found unchanged
        assert re.search(rf"  {name}: 0 added, 0 replaced, 1[02] unchanged, 0 failed", said), said
    assert f"demo collections (tenant demo): {', '.join(names)}" in said  # and the curl searches them
    assert f'"collections": {json.dumps(list(names))}}}\' ' in said and "/query/demo/search" in said
    assert response.status_code == 200, response.text
    chunks = response.json()["chunks"]
    assert chunks and {c["collection"] for c in chunks} <= set(names)
    assert any(c["collection"] == "demo_api" and c["source"] == "pagination.md" for c in chunks), chunks
    counts = {c["name"]: c["documents"] for c in json.loads(cli("collections", "list", "--json").stdout)}
    assert counts["demo_product_docs"] == 12 and counts["demo_support"] == 12 and counts["demo_api"] == 10
    hits = json.loads(cli("search", "rate limit", "-c", "demo_api", "-k", "10", "--json").stdout)["hits"]
    texts = [h["text"] for h in hits]
    assert len(texts) == 10 and len(set(texts)) == 10  # an unscoped search: every chunk once


QUICKSTART = """
import agentrag as ar

store = ar.Store()
store.create_collection("docs", description="Product documentation", exist_ok=True)
store.create_collection("support", description="Support answers and troubleshooting", exist_ok=True)
print(store.ingest("samples/product_docs", collection="docs"))
print(store.ingest("samples/support", collection="support", strict=True))
"""  # the quickstart's Python block (docs/tutorials/first-answer.md), its writing statements


def test_the_quickstart_after_the_demo_finds_each_document_once(cli, demo: str) -> None:  # type: ignore[no-untyped-def]
    """Issue #38: `make demo`, then the quickstart, then `agentrag search refund -c support`: the
    demo's copy of the samples lives in its own collections, so the user's ``support`` holds one
    (``demo``: the demo has run in this data directory)."""
    done = subprocess.run(
        [sys.executable, "-c", QUICKSTART], cwd=REPO, env=cli.env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    hits = json.loads(cli("search", "refund", "-c", "support", "-k", "10", "--json").stdout)["hits"]
    assert hits and any("refund" in h["text"].lower() for h in hits)
    documents: dict[str, set[str]] = {}
    for hit in hits:
        documents.setdefault(hit["source"], set()).add(hit["document_id"])
    assert {source: len(ids) for source, ids in documents.items() if len(ids) > 1} == {}
    chunks = [(h["source"], h["chunk_index"]) for h in hits]
    assert len(chunks) == len(set(chunks))  # each chunk once
    names = {c["name"] for c in json.loads(cli("collections", "list", "--json").stdout)}
    assert {"docs", "support", "demo_product_docs", "demo_support", "demo_api"} <= names


def _answer_of(demo: str, question: str) -> str:
    """The answer ``agentrag demo`` printed for ``question``, its lines joined (textwrap cuts at 100)."""
    section = demo.split(f"Q: {question}", 1)[1].split("\nQ: ", 1)[0]
    said = section.split("  answer (", 1)[1].split("  citations:", 1)[0]
    return " ".join(said.split())


def test_the_readme_demo_and_its_cli_line_state_their_facts(cli, demo: str) -> None:  # type: ignore[no-untyped-def]
    """``make demo``'s two questions as the real CLI prints them (the pagination and the 429; both plans'
    support times and rate limits, the numbers not a ratio), then the README's command line after it
    (``agentrag ask "How long are deleted notes kept in the trash?" --collection demo_product_docs
    --proof``)."""
    from agentrag.demo import QUESTIONS
    from agentrag.eval.answers import fact_hit

    first, second = (_answer_of(demo, q) for q in QUESTIONS)
    assert fact_hit(first, ["cursor-based pagination"]) and fact_hit(first, ["429"]), first
    for fact in ("24 hours", "8 hours", "300", "1,200"):
        assert fact_hit(second, [fact]), (fact, second)
    done = cli(
        "ask", "How long are deleted notes kept in the trash?", "--collection", "demo_product_docs", "--proof"
    )
    answer = done.stdout.split("\nSources:")[0]
    assert any("30 days" in s and "trash" in s.lower() for s in re.split(r"(?<=\.)\s+", answer)), done.stdout


def test_the_fixes_a_typo_in_a_setting_suggests() -> None:
    from agentrag.chat import RAGConfig
    from agentrag.errors import InvalidInputError

    with pytest.raises(
        InvalidInputError, match=r"max_chunk: unknown setting \(did you mean 'max_chunks'\?\)"
    ):
        RAGConfig(max_chunk=3)  # type: ignore[call-arg]
    with pytest.raises(InvalidInputError, match=r"zzz: unknown setting$"):
        RAGConfig(zzz=1)  # type: ignore[call-arg]


def test_http_filters_take_metadata_as_python_does() -> None:
    from pydantic import ValidationError

    from agentrag.retrieval.filters import validate_filters
    from agentrag.server.models import SearchRequest

    body = {"query_text": "refund", "filters": {"metadata": {"tier": "gold", "region": {"in": ["eu", "us"]}}}}
    filters = SearchRequest.model_validate(body).filters
    assert filters is not None
    converted = filters.to_filters()
    assert converted == {"metadata": {"tier": "gold", "region": {"in": ["eu", "us"]}}}
    assert validate_filters(converted) is not None  # the library's own check accepts it
    with pytest.raises(ValidationError, match="at most 4000 characters"):
        SearchRequest.model_validate({"query_text": "x" * 4001})


def test_a_long_command_off_a_terminal_prints_progress_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentrag.cli import common

    monkeypatch.setattr(common, "PROGRESS_LINE_SECONDS", 0.0)
    with common.progress(4, True, desc="ingest") as advance:  # stderr is captured: no terminal
        for status in ("added", "writing", "added", "unchanged"):
            advance(type("Event", (), {"status": status})())
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith("ingest: 1/4 docs (25%), ")
    assert "ingest: 3/4 docs (75%)" in err and "4/4" not in err  # "writing" events do not count
    with common.progress(4, False, desc="ingest") as advance:  # --json: nothing
        advance(type("Event", (), {"status": "added"})())
    assert capsys.readouterr().err == ""
