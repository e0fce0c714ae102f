"""Ingesting every format into the real store: locators in hits, proofs, the CLI and the notebook
display; a table cell's question finds its row with the header; bad files fail alone, typed,
with bounded memory."""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import pytest

from agentrag.errors import EncryptedFileError, FileTooLargeError, InvalidInputError, UnreadableFileError
from agentrag.readers import LIMITS, read
from agentrag.store.store import Store
from tests import reader_fixtures as fx

pytest.importorskip("docx")
pytest.importorskip("openpyxl")


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "shared-drive"
    folder.mkdir()
    fx.write_docx(folder / "handbook.docx")
    fx.write_pptx(folder / "review.pptx")
    fx.write_xlsx(folder / "plans.xlsx", rows=40)
    (folder / "rate-limits.html").write_text(fx.DOCS_PAGE)
    fx.write_eml(folder / "budget.eml", attachment=fx.xlsx_bytes())
    (folder / "faq.jsonl").write_text('{"title": "Reset", "text": "Use the reset link in the login page."}\n')
    return folder


def _bad_files(folder: Path) -> dict[str, str]:
    """Bad files next to good ones, and the error type each must fail with."""
    good = (folder / "handbook.docx").read_bytes()
    (folder / "truncated.docx").write_bytes(good[: len(good) // 2])
    (folder / "locked.xlsx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600)
    pypdf = pytest.importorskip("pypdf")
    writer = pypdf.PdfWriter()
    writer.add_blank_page(200, 200)
    writer.encrypt("secret")
    with (folder / "locked.pdf").open("wb") as f:
        writer.write(f)
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
        archive.writestr("xl/worksheets/sheet1.xml", b"\x00" * (64 * 2**20))
    (folder / "bomb.xlsx").write_bytes(bomb.getvalue())
    with (folder / "huge.csv").open("wb") as f:  # 200 MB (sparse: nothing is written)
        f.truncate(200 * 2**20)
    (folder / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    return {
        "truncated.docx": "UnreadableFileError",
        "locked.xlsx": "EncryptedFileError",
        "locked.pdf": "EncryptedFileError",
        "bomb.xlsx": "FileTooLargeError",
        "huge.csv": "FileTooLargeError",
        "image.md": "UnreadableFileError",
    }


def test_a_folder_of_formats_and_bad_files(tmp_path: Path, store: Store, collection_name: str) -> None:
    folder = _folder(tmp_path)
    expected = _bad_files(folder)
    store.create_collection(collection_name)
    report = store.ingest(folder, collection=collection_name, chunk_size=400, chunk_overlap=60)
    assert sorted(report.added) == sorted(
        ["handbook.docx", "review.pptx", "plans.xlsx", "rate-limits.html", "budget.eml", "faq.jsonl"]
    )
    assert {source: report.error_types[source] for source, _ in report.failed} == expected
    assert {f["source"]: f["type"] for f in report.to_dict()["failed"]} == expected
    # every stored chunk is an exact slice of its stored document, whatever the format
    from sqlalchemy import text

    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT d.text AS doc, c.text, c.start_char, c.end_char, c.locator FROM agentrag.chunks c"
                " JOIN agentrag.documents d ON d.id = c.document_id JOIN agentrag.collections k"
                " ON k.id = c.collection_id WHERE k.name = :n"
            ),
            {"n": collection_name},
        ).all()
    assert rows and all(r.doc[r.start_char : r.end_char] == r.text for r in rows)
    assert any(r.locator and r.locator.get("slide") == 3 for r in rows)
    # re-ingesting the same folder changes nothing
    again = store.ingest(folder, collection=collection_name, chunk_size=400, chunk_overlap=60)
    assert sorted(again.unchanged) == sorted(report.added) and not again.added


def test_table_cell_question_finds_its_row_with_the_header(
    tmp_path: Path, database_url: str, local_embedder: object, collection_name: str
) -> None:
    store = Store(database_url, embedder=local_embedder)  # type: ignore[arg-type]
    try:
        store.create_collection(collection_name)
        folder = _folder(tmp_path)
        assert store.ingest(folder, collection=collection_name, chunk_size=400).ok
        hits = store.search(
            "How much does the Business plan cost per month?", collections=collection_name, top_k=3
        )
        top = hits[0]
        assert top.source in ("plans.xlsx", "handbook.docx")
        assert "| Plan | Seats | Price per month | Support |" in top.text
        assert "| Business | 100 | 480 |" in top.text
        assert top.locator in (
            {"sheet": "Plans", "rows": [2, 5]},
            {"section": ["Security handbook", "Plans"], "table": 1, "rows": [2, 5]},
        )
        slide = store.search("Where will the engineers be hired?", collections=collection_name, top_k=1)[0]
        assert slide.source == "review.pptx" and slide.page == 3
        assert slide.locator == {"slide": 3, "title": "Hiring plan"}
    finally:
        store.close()


def test_locators_in_proof_cli_and_display(tmp_path: Path, store: Store, collection_name: str) -> None:
    import agentrag as ar
    from agentrag.display import search_result_html
    from agentrag.proof import PROOF_SCHEMA

    store.create_collection(collection_name)
    store.ingest(_folder(tmp_path), collection=collection_name)
    result = store.search(
        "Hiring plan Lisbon engineers", collections=collection_name, mode="lexical", top_k=1
    )
    hit = result[0]
    assert hit.locator == {"slide": 3, "title": "Hiring plan"}
    html = search_result_html(result)
    assert "slide 3 &quot;Hiring plan&quot;" in html
    ctx = ar.new("Hiring plan Lisbon engineers", store=store, collections=[collection_name]).search()
    proof = ctx.proof().to_dict()
    assert proof["chunks"][0]["locator"] == {"slide": 3, "title": "Hiring plan"}
    assert proof["chunks"][0]["page"] == 3
    assert PROOF_SCHEMA["properties"]["chunks"]["items"]["properties"]["locator"] == {
        "type": ["object", "null"]
    }
    assert 'slide 3 "Hiring plan"' in str(result)  # the CLI's search table


def test_reader_option_overrides_and_is_checked(tmp_path: Path, store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    path = tmp_path / "notes.data"
    path.write_text("# Heading\n\nbody about reader overrides")
    report = store.ingest(path, collection=collection_name, reader="markdown")
    assert report.added == ("notes.data",)
    hit = store.search("reader overrides", collections=collection_name, mode="lexical", top_k=1)[0]
    assert hit.locator == {"section": ["Heading"]}
    with pytest.raises(InvalidInputError, match="unknown reader 'word'"):
        store.ingest(path, collection=collection_name, reader="word")


def test_bad_files_fail_typed_with_bounded_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    fx.write_docx(folder / "handbook.docx")
    expected = _bad_files(folder)
    types = {
        "UnreadableFileError": UnreadableFileError,
        "EncryptedFileError": EncryptedFileError,
        "FileTooLargeError": FileTooLargeError,
    }
    tracemalloc.start()
    try:
        for name, kind in expected.items():
            with pytest.raises(types[kind]) as caught:
                read(folder / name)
            assert caught.value.source == name  # type: ignore[attr-defined]
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20  # the 64 MB bomb and the 200 MB sheet were refused unread
    # a sheet over the text limit stops while streaming, not after
    monkeypatch.setattr(LIMITS, "max_text_chars", 50_000)
    big = tmp_path / "big.csv"
    big.write_text("a,b\n" + "".join(f"{i},value {i}\n" for i in range(200_000)))
    tracemalloc.start()
    try:
        with pytest.raises(FileTooLargeError, match="more than 50,000 characters"):
            read(big)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5 * 2**20  # the 3.5 MB file was not held whole


def test_search_over_http_returns_locators(
    tmp_path: Path, store: Store, client: Any, collection_name: str
) -> None:
    from tests.server_support import auth, new_tenant

    tenant = new_tenant(store, "readers")
    store.create_collection(collection_name)
    deck = fx.write_pptx(tmp_path / "review.pptx")
    assert store.ingest(deck, collection=collection_name, tenant=tenant).ok
    response = client.post(
        f"/api/v1/query/{tenant}/search",
        json={"query_text": "Lisbon engineers hiring", "collections": [collection_name], "mode": "lexical"},
        headers=auth(tenant),
    )
    assert response.status_code == 200, response.text
    top = response.json()["chunks"][0]
    assert top["locator"] == {"slide": 3, "title": "Hiring plan"} and top["page"] == 3
