"""Files of every format the readers read, written by the formats' own writers (python-docx,
python-pptx, openpyxl, ebooklib, the email package, Pillow for an image-only PDF) or by hand
(HTML pages), with facts in them that tests ask about."""

from __future__ import annotations

import io
from email.message import EmailMessage
from pathlib import Path

PLANS = [
    ("Plan", "Seats", "Price per month", "Support"),
    ("Free", 3, 0, "Community forum"),
    ("Team", 25, 120, "Email within one business day"),
    ("Business", 100, 480, "Phone within four hours"),
    ("Enterprise", 1000, 2900, "Dedicated engineer"),
]


def write_docx(path: Path) -> Path:
    import docx

    document = docx.Document()
    document.core_properties.title = "Security handbook"
    document.add_heading("Security handbook", level=1)
    document.add_paragraph("This handbook describes how Lumen protects customer data.")
    document.add_heading("Data regions", level=2)
    document.add_paragraph("Each workspace is stored in one region chosen when it is created.")
    document.add_heading("Passwords", level=2)
    document.add_paragraph(
        "Passwords must be at least fourteen characters long and are hashed with Argon2id."
    )
    document.add_paragraph("Rotate service passwords every ninety days", style="List Bullet")
    document.add_paragraph("Never reuse a password across workspaces", style="List Bullet")
    document.add_heading("Plans", level=2)
    table = document.add_table(rows=0, cols=4)
    for row in PLANS:
        cells = table.add_row().cells
        for cell, value in zip(cells, row, strict=True):
            cell.text = str(value)
    document.add_paragraph("Prices exclude VAT.")
    document.save(str(path))
    return path


def write_pptx(path: Path) -> Path:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    titles = ["Quarterly review", "Revenue", "Hiring plan"]
    bodies = [
        ["Agenda: revenue, hiring, risks"],
        ["Revenue grew 38 percent year over year", "Churn fell to 2.1 percent"],
        ["We will hire eleven engineers in the Lisbon office"],
    ]
    for title, lines in zip(titles, bodies, strict=True):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        frame = slide.placeholders[1].text_frame
        frame.text = lines[0]
        for line in lines[1:]:
            frame.add_paragraph().text = line
        if title == "Hiring plan":
            slide.notes_slide.notes_text_frame.text = "Speaker note: the Lisbon lease starts in March."
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Regional numbers"
    shape = slide.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(2))
    for r, row in enumerate([("Region", "Customers"), ("EMEA", "1,240"), ("APAC", "815")]):
        for c, value in enumerate(row):
            shape.table.cell(r, c).text = value
    deck.save(str(path))
    return path


def write_xlsx(path: Path, rows: int = 0) -> Path:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Plans"
    for row in PLANS:
        sheet.append(list(row))
    inventory = workbook.create_sheet("Inventory")
    inventory.append(["SKU", "Item", "Warehouse", "Quantity"])
    for i in range(rows):
        inventory.append(
            [f"SKU-{i:05d}", f"Widget model {i}", ["Porto", "Lyon", "Gdansk"][i % 3], i * 7 % 500]
        )
    workbook.save(str(path))
    return path


DOCS_PAGE = """<!doctype html><html><head><title>Rate limits - Lumen Docs</title>
<script>window.analytics = "tracking";</script><style>.nav{color:red}</style></head>
<body><header><nav><a href="/">Home</a> <a href="/docs">Docs</a> <a href="/pricing">Pricing</a>
<a href="/login">Log in</a></nav></header>
<aside class="sidebar"><ul><li><a href="/a">Getting started</a></li><li><a href="/b">Authentication</a></li>
<li><a href="/c">Rate limits</a></li><li><a href="/d">Webhooks</a></li></ul></aside>
<main><article><h1>Rate limits</h1>
<p>The API allows 600 requests per minute per workspace. Bursts above the limit receive HTTP 429
with a Retry-After header that says how many seconds to wait.</p>
<h2>Per-plan limits</h2><p>Each plan has its own ceiling on requests per minute.</p>
<table><tr><th>Plan</th><th>Requests per minute</th></tr><tr><td>Free</td><td>60</td></tr>
<tr><td>Team</td><td>600</td></tr><tr><td>Enterprise</td><td>6000</td></tr></table>
<h2>Retrying</h2><p>Clients should back off exponentially, starting at one second, and honour the
Retry-After header before they send the request again.</p></article></main>
<footer><p>Copyright 2026 Lumen Inc. All rights reserved.</p><a href="/privacy">Privacy policy</a>
<a href="/cookies">Cookie settings</a></footer></body></html>"""

SAVED_PAGE = """<html><head><meta charset="windows-1252"><title>Office move</title></head><body>
<div id="top-menu"><a href="/">Intranet</a> | <a href="/people">People</a> | <a href="/it">IT</a></div>
<div class="content"><h2>Office move</h2>
<p>The Porto office moves to Rua das Flores 12 on 3 March. Desks are assigned by team, and the
parking garage entrance is on the north side of the building.</p>
<p>Bring your badge: the old badges stop working on the day of the move.</p></div>
<div class="footer">Internal use only. Last edited by the facilities team.</div></body></html>"""


def write_eml(path: Path, *, attachment: bytes | None = None, attachment_name: str = "plans.xlsx") -> Path:
    message = EmailMessage()
    message["From"] = "Ana Costa <ana@example.com>"
    message["To"] = "team@example.com"
    message["Subject"] = "Budget approval for Q3"
    message["Date"] = "Tue, 14 Jul 2026 09:30:00 +0100"
    message.set_content("Hi all,\n\nThe Q3 budget of 84,000 euros was approved on Monday.\n\nAna")
    if attachment is not None:
        message.add_attachment(
            attachment, maintype="application", subtype="octet-stream", filename=attachment_name
        )
    path.write_bytes(bytes(message))
    return path


def write_mbox(path: Path) -> Path:
    import mailbox

    box = mailbox.mbox(str(path))
    for i, (subject, body) in enumerate(
        [("Standup moved", "Standup moves to 10:15 from Monday."), ("Lunch", "Team lunch on Friday at noon.")]
    ):
        message = EmailMessage()
        message["From"] = f"person{i}@example.com"
        message["Subject"] = subject
        message["Date"] = f"Mon, 0{i + 1} Jun 2026 08:00:00 +0000"
        message.set_content(body)
        box.add(message)
    box.flush()
    box.close()
    return path


def write_epub(path: Path) -> Path:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("lumen-guide")
    book.set_title("The Lumen field guide")
    book.set_language("en")
    book.add_author("Ana Costa")
    chapters = []
    for i, (title, text) in enumerate(
        [
            ("Getting started", "Install the Lumen agent and sign in with your workspace address."),
            ("Backups", "Backups run every night at 02:00 UTC and are kept for thirty-five days."),
        ],
        start=1,
    ):
        chapter = epub.EpubHtml(title=title, file_name=f"chap_{i}.xhtml", lang="en")
        chapter.content = f"<html><body><h1>{title}</h1><p>{text}</p></body></html>"
        book.add_item(chapter)
        chapters.append(chapter)
    book.toc = chapters
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *chapters]
    epub.write_epub(str(path), book)
    return path


SCANNED_TEXT = ["Invoice 4471", "Total due 1,250 EUR", "Payment within 30 days"]


def write_scanned_pdf(path: Path, pages: list[list[str]] | None = None) -> Path:
    """An image-only PDF: each page is text rendered into a picture (no text layer)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=44)
    images = []
    for lines in pages or [SCANNED_TEXT]:
        image = Image.new("RGB", (1240, 1754), "white")
        draw = ImageDraw.Draw(image)
        for i, line in enumerate(lines):
            draw.text((120, 160 + i * 110), line, fill="black", font=font)
        images.append(image)
    images[0].save(str(path), "PDF", resolution=150, save_all=True, append_images=images[1:])
    return path


def xlsx_bytes() -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Budget"
    sheet.append(["Line", "Amount"])
    sheet.append(["Travel", 12000])
    sheet.append(["Hardware", 31000])
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def add_footnote(path: Path, text: str) -> Path:
    """Give a python-docx file a footnotes part with one footnote (python-docx cannot write one)."""
    import zipfile

    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    footnotes = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:footnotes xmlns:w="{w}">'
        '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
        '<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p>'
        f'</w:footnote><w:footnote w:id="1"><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:footnote>'
        "</w:footnotes>"
    )
    parts = {}
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            parts[name] = archive.read(name)
    parts["word/footnotes.xml"] = footnotes.encode()
    rels = parts["word/_rels/document.xml.rels"].decode()
    parts["word/_rels/document.xml.rels"] = rels.replace(
        "</Relationships>",
        '<Relationship Id="rIdFn1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
        'footnotes" Target="footnotes.xml"/></Relationships>',
    ).encode()
    types = parts["[Content_Types].xml"].decode()
    parts["[Content_Types].xml"] = types.replace(
        "</Types>",
        '<Override PartName="/word/footnotes.xml" ContentType="application/'
        'vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml"/></Types>',
    ).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return path


def write_table_pdf(path: Path) -> Path:
    """A one-page text PDF with a paragraph and a ruled table (PLANS), drawn by hand (no dependencies)."""
    ops = ["BT /F1 11 Tf 72 740 Td (Plans and prices for every team size are below.) Tj ET"]
    widths = [90, 60, 110, 190]
    top, height = 700, 22
    for r, row in enumerate(PLANS):
        y = top - r * height
        x = 72
        for c, value in enumerate(row):
            ops.append(f"{x} {y - height} {widths[c]} {height} re S")
            ops.append(f"BT /F1 9 Tf {x + 4} {y - 15} Td ({value}) Tj ET")
            x += widths[c]
    ops.append(f"BT /F1 11 Tf 72 {top - len(PLANS) * height - 30} Td (Prices exclude VAT.) Tj ET")
    stream = "\n".join(ops)
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [5 0 R] /Count 1 >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        " /Resources << /Font << /F1 3 0 R >> >> >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path
