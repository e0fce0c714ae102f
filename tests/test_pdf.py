"""PDF ingestion: text per page, page numbers on chunks, a broken PDF named in the report."""

from __future__ import annotations

from pathlib import Path

from agentrag.store.readers import read_file
from agentrag.store.store import Store


def _pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF with one line of Helvetica text per page (no dependencies)."""
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        None,
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for text in pages:
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream.decode()}\nendstream")
        content_id = len(objects)
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R"
            " /Resources << /Font << /F1 3 0 R >> >> >>"
        )
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def test_pdf_pages_become_page_numbers(tmp_path: Path, store: Store, collection_name: str) -> None:
    path = tmp_path / "manual.pdf"
    path.write_bytes(_pdf(["Page one talks about cursors.", "Page two talks about rate limits."]))
    source = read_file(path)
    assert source.page_starts == (0, source.text.index("Page two"))
    store.create_collection(collection_name)
    result = store.ingest(path, collection=collection_name, chunk_size=40, chunk_overlap=0)
    assert result.ok and result.chunks_written >= 2
    hits = store.search("rate limits", collections=collection_name, mode="lexical", top_k=1)
    assert hits[0].page == 2
    assert store.search("cursors", collections=collection_name, mode="lexical", top_k=1)[0].page == 1


def test_broken_pdf_is_reported_by_name(tmp_path: Path, store: Store, collection_name: str) -> None:
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    (tmp_path / "fine.md").write_text("fine")
    store.create_collection(collection_name)
    report = store.ingest(tmp_path, collection=collection_name)
    assert [Path(s).name for s, _ in report.failed] == ["broken.pdf"]
    assert "broken.pdf" in report.failed[0][1]
    assert [Path(s).name for s in report.added] == ["fine.md"]
