"""store.sync under concurrency and interruption: two syncs at once, a searcher during syncs, a
sync killed at every step and run again, and hypothesis over edit sequences (issue #24)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.sync_support import rows, write


class Killed(BaseException):
    """Raised from a progress callback: the sync stops there, as a killed process would."""


class Killer:
    """A progress callback that raises :class:`Killed` at its ``stop_at``-th event."""

    def __init__(self, stop_at: int) -> None:
        self.stop_at, self.seen = stop_at, 0

    def __call__(self, event: Any) -> None:
        self.seen += 1
        if self.seen - 1 == self.stop_at:
            raise Killed(event.step)


def fresh_rows(store, coll: str, folder: Path) -> dict:  # type: ignore[no-untyped-def,type-arg]
    store.delete_collection(coll)
    store.create_collection(coll)
    assert store.ingest(folder, collection=coll).ok
    return rows(store, coll)


def version(folder: Path, n: int) -> Path:
    """Two versions of a folder: version 2 modifies, deletes, renames and adds files of version 1."""
    shutil.rmtree(folder, ignore_errors=True)
    for i in range(8):
        write(folder, f"f{i}.md", f"File {i} token{i} first version.\n" + "Filler sentence here. " * 40)
    if n == 2:
        write(folder, "f0.md", "File 0 token0 second version.\n" + "Other filler sentence. " * 40)
        write(folder, "f1.md", "File 1 token1 second version.\n")
        (folder / "f2.md").unlink()
        (folder / "f3.md").rename(folder / "g3.md")
        write(folder, "new.md", "A new file tokennew.\n")
    return folder


def test_a_kill_at_every_step_then_a_rerun_converges(store, collection_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    coll, src = collection_name, tmp_path / "src"
    store.create_collection(coll)
    store.sync(version(src, 1), collection=coll)
    events: list[str] = []
    store.sync(version(src, 2), collection=coll, on_progress=lambda e: events.append(e.step))
    expected = rows(store, coll)
    assert expected == fresh_rows(store, coll, src)
    assert {"listed", "read", "renamed", "written", "deleted", "recorded"} <= set(events)
    for stop_at in range(len(events)):
        store.delete_collection(coll)
        store.create_collection(coll)
        store.sync(version(src, 1), collection=coll)
        version(src, 2)

        kill = Killer(stop_at)

        with pytest.raises(Killed):
            store.sync(src, collection=coll, on_progress=kill)
        report = store.sync(src, collection=coll)
        assert report.ok, stop_at
        assert rows(store, coll) == expected, f"killed at event {stop_at} ({events[stop_at]})"


KILLED_SYNC = """
import sys
from agentrag.store.store import Store
from agentrag.testing import FakeEmbedder
store = Store(sys.argv[1], embedder=FakeEmbedder(dimensions=64))
print("ready", flush=True)
store.sync(sys.argv[2], collection=sys.argv[3])
"""


def test_a_sync_killed_by_sigkill_converges_on_the_next_run(
    store, database_url, collection_name, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    coll, src = collection_name, tmp_path / "src"
    store.create_collection(coll)
    for i in range(300):
        write(src, f"d{i:03}.md", f"Document {i} about topic {i % 17}. " * 30)
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_SYNC, database_url, str(src), coll], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(1.0)  # somewhere in the listing, reading or writing: any point must converge
    proc.kill()
    proc.wait()
    assert store.sync(src, collection=coll).ok
    synced = rows(store, coll)
    assert len(synced["documents"]) == 300
    assert synced == fresh_rows(store, coll, src)


def test_two_syncs_of_one_source_serialise(store, collection_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    coll, src = collection_name, tmp_path / "src"
    store.create_collection(coll)
    store.sync(version(src, 1), collection=coll)
    version(src, 2)
    reports = []
    threads = [
        threading.Thread(target=lambda: reports.append(store.sync(src, collection=coll))) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first, second = sorted(reports, key=lambda r: not r.changed)
    assert first.changed and not second.changed  # the second waited for the first, then found nothing to do
    assert (
        first.added == ("new.md",) and first.deleted == ("f2.md",) and first.renamed == (("f3.md", "g3.md"),)
    )
    expected = rows(store, coll)
    assert expected == fresh_rows(store, coll, src)


def test_a_searcher_never_sees_a_half_replaced_document(store, collection_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    coll, src = collection_name, tmp_path / "src"
    store.create_collection(coll)
    for i in range(6):
        write(src, f"f{i}.md", f"Document {i} about the shared subject kiwi, revision 0. " * 20)
    store.sync(src, collection=coll)
    stop = threading.Event()
    seen: list[tuple[int, set[str], str]] = []

    errors: list[BaseException] = []

    def search() -> None:
        try:
            searching()
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)
            raise

    def searching() -> None:
        while not stop.is_set():
            for mode in ("hybrid", "lexical", "vector", "lexical_sql"):
                hits = store.search("kiwi subject document", collections=coll, mode=mode, top_k=50)
                by_source: dict[str, set[str]] = {}
                for hit in hits:
                    by_source.setdefault(hit.source or "", set()).add(hit.document_id)
                seen.append((len(by_source), {s for s, ids in by_source.items() if len(ids) > 1}, mode))

    searcher = threading.Thread(target=search)
    searcher.start()
    try:
        for revision in range(1, 31):
            for i in range(6):
                write(
                    src, f"f{i}.md", f"Document {i} about the shared subject kiwi, revision {revision}. " * 20
                )
            assert store.sync(src, collection=coll).modified == tuple(f"f{i}.md" for i in range(6))
    finally:
        stop.set()
        searcher.join()
    assert not errors
    assert len(seen) > 10
    assert {mode for _n, _both, mode in seen} == {"hybrid", "lexical", "vector", "lexical_sql"}
    assert all(both == set() for _n, both, _mode in seen)  # never two revisions of one document
    assert [(n, mode) for n, _both, mode in seen if n != 6] == []  # never neither, in every mode


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["put", "delete", "rename"]),
                st.sampled_from(["a.md", "b.md", "sub/c.md", "d.txt"]),
                st.sampled_from(["one", "two", "three"]),
            ),
            min_size=1,
            max_size=4,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_any_sequence_of_syncs_equals_a_fresh_ingest(store, tmp_path_factory, edits) -> None:  # type: ignore[no-untyped-def]
    import uuid

    coll = f"h_{uuid.uuid4().hex[:10]}"
    src = tmp_path_factory.mktemp("src")
    store.create_collection(coll)
    try:
        for round_ in edits:
            for op, key, body in round_:
                path = src / key
                if op == "put":
                    write(src, key, f"Text {body}: " + f"{body} sentence. " * (40 if body == "three" else 3))
                elif op == "delete" and path.exists():
                    path.unlink()
                elif op == "rename" and path.exists():
                    target = src / ("moved-" + key.replace("/", "-"))
                    if not target.exists():
                        path.rename(target)
            assert store.sync(src, collection=coll).ok
        synced = rows(store, coll)
        assert synced == fresh_rows(store, coll, src)
    finally:
        store.delete_collection(coll)


def test_a_search_whose_snapshot_is_older_than_the_bm25_index_keeps_the_document(
    store, collection_name, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    # The interleaving that failed the test above in fresh-clone CI ((0, 'lexical')): a search's
    # snapshot reads the collection at version V; before its lexical leg runs, a sync commits V+1
    # and another search builds the BM25 index at V+1. That index's chunk ids are invisible in the
    # V snapshot, and the document vanished from the lexical leg. Made deterministic by running the
    # write and the other search right after the first search read its collections.
    import agentrag.retrieval.search as search_module

    coll = collection_name
    store.create_collection(coll)
    store.ingest_text("The kiwi document, revision zero.", collection=coll, source="a.md")
    assert len(store.search("kiwi document", collections=coll, mode="lexical")) == 1
    real, fired = search_module.load_collections, []

    def then_a_write_and_another_search(conn, names):  # type: ignore[no-untyped-def]
        colls = real(conn, names)
        if not fired:
            fired.append(True)
            store.ingest_text("The kiwi document, revision one.", collection=coll, source="a.md")
            assert "revision one" in store.search("kiwi document", collections=coll, mode="lexical")[0].text
        return colls

    monkeypatch.setattr(search_module, "load_collections", then_a_write_and_another_search)
    hits = store.search("kiwi document", collections=coll, mode="lexical")
    assert fired and [hit.source for hit in hits] == ["a.md"]


@pytest.mark.parametrize("index", ["newer", "older"])
def test_a_search_racing_a_write_on_every_snapshot_keeps_the_document(
    store, collection_name, monkeypatch: pytest.MonkeyPatch, index: str
) -> None:  # type: ignore[no-untyped-def]
    # The test above, on every snapshot the search takes. "newer": after the search reads its
    # collections, a write commits and another search builds the BM25 index at the new version;
    # "older": right after the search brought the caches up to date, a write commits, so its next
    # snapshot is newer than the index. The last attempt used to take the index as it was: the
    # document's chunk in it is not the one the snapshot sees, and the document vanished (0 hits).
    import agentrag.retrieval.search as search_module

    coll, writes = collection_name, [0]
    store.create_collection(coll)
    store.ingest_text("The kiwi document, revision 0.", collection=coll, source="a.md")
    assert len(store.search("kiwi document", collections=coll, mode="lexical")) == 1
    inside = threading.local()

    def write() -> None:
        writes[0] += 1
        store.ingest_text(f"The kiwi document, revision {writes[0]}.", collection=coll, source="a.md")

    if index == "newer":
        real_load = search_module.load_collections

        def load_then_race(conn, names):  # type: ignore[no-untyped-def]
            colls = real_load(conn, names)
            if not getattr(inside, "on", False):
                inside.on = True
                try:
                    write()
                    assert store.search("kiwi document", collections=coll, mode="lexical")
                finally:
                    inside.on = False
            return colls

        monkeypatch.setattr(search_module, "load_collections", load_then_race)
    else:
        real_prepare = search_module.prepare_lexical

        def prepare_then_write(*args):  # type: ignore[no-untyped-def]
            real_prepare(*args)
            write()

        monkeypatch.setattr(search_module, "prepare_lexical", prepare_then_write)
        write()  # the cache is older than the first snapshot too
    hits = store.search("kiwi document", collections=coll, mode="lexical")
    assert writes[0] >= search_module._SNAPSHOT_ATTEMPTS  # a write raced every snapshot
    assert [hit.source for hit in hits] == ["a.md"]
    assert hits[0].text.startswith("The kiwi document, revision ")
