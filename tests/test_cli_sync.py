"""``agentrag sync`` and ``agentrag documents show | revisions`` (issue #24)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentrag import cli
from agentrag.store.store import Store
from tests.sync_support import write


@pytest.fixture
def run(store: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    monkeypatch.setattr(cli.common, "open_store", lambda args: store)  # the test database, FakeEmbedder

    def invoke(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return invoke


def test_sync_prints_the_report_and_json(run, collection_name: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(src, "a.md", "Alpha.\n")
    code, _out, err = run("sync", str(src), "-c", collection_name)
    assert code == 2 and "add --create" in err
    code, out, _err = run("sync", str(src), "-c", collection_name, "--create")
    assert code == 0 and "1 added, 0 modified, 0 deleted, 0 renamed, 0 unchanged, 0 failed" in out
    assert "  added: a.md" in out
    write(src, "a.md", "Alpha, edited.\n")
    (src / "bad.md").write_bytes(b"\xff\xfe")
    code, out, _err = run("sync", str(src), "-c", collection_name, "--dry-run", "--json")
    data = json.loads(out)
    assert (
        code == 1
        and data["dry_run"]
        and data["modified"] == ["a.md"]
        and data["failed"][0]["source"] == "bad.md"
    )
    code, out, _err = run("sync", str(src), "-c", collection_name, "--json", "--exclude", "bad*")
    data = json.loads(out)
    assert code == 0 and data["modified"] == ["a.md"] and data["failed"] == []
    doc_id = data["document_ids"]["a.md"]

    code, out, _err = run("documents", "revisions", doc_id)
    assert code == 0 and out.splitlines()[0].split()[0] == "1" and "current" in out.splitlines()[1]
    code, out, _err = run("documents", "show", doc_id, "--revision", "1")
    assert code == 0 and "revision 1" in out and "Alpha.\n" in out
    code, out, _err = run("documents", "show", doc_id, "--json")
    assert json.loads(out)["text"] == "Alpha, edited.\n" and json.loads(out)["revision"] == 2
    code, _out, err = run("documents", "show", doc_id, "--revision", "9")
    assert code == 2 and "no revision 9" in err
    code, _out, err = run("sync", str(src), "-c", collection_name, "--keep-revisions", "-1")
    assert code == 2 and "--keep-revisions" in err


def test_sync_applies_a_changed_sidecar(run, store: Store, collection_name: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``agentrag sync`` reads ``<file>.grants`` sidecars (issue #26): a changed one is a regrant."""
    store.create_collection(collection_name, acl=True)
    write(tmp_path, "a.md", "Alpha.\n")
    write(tmp_path, "a.md.grants", "group:hr\n")
    code, out, _err = run("sync", str(tmp_path), "-c", collection_name)
    assert code == 0 and "1 added," in out and "a.md.grants" not in out
    write(tmp_path, "a.md.grants", "group:hr\nuser:ann\n")
    code, out, _err = run("sync", str(tmp_path), "-c", collection_name)
    assert code == 0 and "0 modified, 1 regranted, 0 deleted" in out and "  regranted: a.md" in out
    code, out, _err = run("sync", str(tmp_path), "-c", collection_name, "--json")
    assert json.loads(out)["regranted"] == [] and json.loads(out)["read"] == 0
    doc_id = json.loads(out)["document_ids"]["a.md"]
    assert store.grants(doc_id) == ["group:hr", "user:ann"]


def test_sync_watch_syncs_again_on_change(store: Store, collection_name: str, tmp_path: Path) -> None:
    from agentrag.store.sync_watch import watch

    pytest.importorskip("watchfiles")
    src = tmp_path / "src"
    write(src, "a.md", "Alpha.\n")
    store.create_collection(collection_name)
    reports: list[Any] = []
    stop = threading.Event()
    thread = threading.Thread(
        target=watch,
        args=(store, src),
        kwargs={"collection": collection_name, "on_report": reports.append, "debounce_ms": 200, "stop": stop},
    )
    thread.start()
    try:
        deadline = time.monotonic() + 120  # a bound for a failure only
        while not reports and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reports and reports[0].added == ("a.md",)
        # The watcher starts watching some time after its first report, later on a loaded machine: a
        # change made before that is not seen. So the file is written again until a sync picks it up,
        # each write a change the running watcher sees (nothing here assumes how long starting takes).
        written_at = -1.0
        while not any(r.added == ("b.md",) for r in reports) and time.monotonic() < deadline:
            if time.monotonic() - written_at > 2.0:
                write(src, "b.md", "Beta.\n", old=False)
                written_at = time.monotonic()
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert any(r.added == ("b.md",) for r in reports)
    assert [d.source for d in store.documents(collection_name)] == ["a.md", "b.md"]


def test_watch_refuses_a_url(store: Store, collection_name: str) -> None:
    from agentrag.errors import InvalidInputError
    from agentrag.store.sync_watch import watch

    with pytest.raises(InvalidInputError, match="cron"):
        watch(store, "s3://bucket/kb", collection=collection_name, on_report=print)


def test_sync_chunk_size_rechunks_and_says_so(run, collection_name: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(
        src, "long.md", "\n\n".join(f"Paragraph {i} about apples and pears, long enough." for i in range(40))
    )
    code, out, _err = run("sync", str(src), "-c", collection_name, "--create", "--chunk-size", "300")
    assert code == 0 and "1 added" in out
    code, out, _err = run("sync", str(src), "-c", collection_name, "--chunk-size", "300")
    assert code == 0 and "1 unchanged" in out and "rechunked" not in out
    code, out, _err = run("sync", str(src), "-c", collection_name)  # the default size now
    assert code == 0 and "0 modified, 1 rechunked, 0 deleted" in out and "  rechunked: long.md" in out
    code, _out, err = run("sync", str(src), "-c", collection_name, "--chunk-size", "0")
    assert code == 2 and "--chunk-size takes an integer >= 1" in err
