"""Acceptance for issue #13: a new user's first session, driven through the CLI as subprocesses.

A fresh embedded PostgreSQL in its own data directory (as on a fresh machine), the real local
embedder, the sample corpus plus one broken file: create a collection, ingest, search, ask, make
the typical mistakes (a typo'd filter, the old filter names, an unknown collection, an empty
collection, a session scope over shared documents) and check what the user reads.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
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

    def run(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [agentrag, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == code, (
            f"agentrag {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
        )
        return done

    yield run
    if "stop" in run("db", "--help").stdout:  # a server kept running between calls
        run("db", "stop")
    shutil.rmtree(data, ignore_errors=True)


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
    assert re.search(r"mode: full  grounded: yes  sources: \d+", rest)

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
    assert "no collection named 'suport' (collections in this database: 'support')" in err
    cli("collections", "create", "drafts")
    out = cli("search", "recover a deleted note", "-c", "drafts").stdout
    assert "no hits: collection 'drafts' is empty: nothing has been ingested into it in this database" in out
    out = cli("ask", "How do I recover a deleted note?", "-c", "drafts").stdout
    assert (
        "I could not find anything relevant to this question in drafts: collection 'drafts' is empty" in out
    )
    assert "grounded: no  sources: 0" in out

    # a session scope over documents ingested without one
    out = cli("search", "refund", "-c", "support", "--mode", "lexical", "--session", "chat-1").stdout
    assert "no hits: the scope (session='chat-1') excludes all 12 documents" in out
