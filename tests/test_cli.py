"""The CLI's store verbs: db, collections, ingest (exit codes, --json), documents."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentrag import cli
from agentrag.store.store import Store


@pytest.fixture
def run(store: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    monkeypatch.setattr(cli.common, "open_store", lambda args: store)  # the test database, FakeEmbedder

    def invoke(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return invoke


def test_db_status_in_a_subprocess(database_url: str, store: Store) -> None:  # store: migrated
    out = subprocess.run(
        [sys.executable, "-m", "agentrag", "--database-url", database_url, "db", "status", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    data = json.loads(out)
    from agentrag.store.migrate import available_migrations

    assert (
        data["applied"] == [m.version for m in available_migrations()]
        and data["pending"] == []
        and data["pgvector"].startswith("0.8")
    )
    assert "***" in data["database"] or "@" not in data["database"].split("//")[1].split("/")[0][:-1]


def test_collections_create_list_delete(run: Any, collection_name: str) -> None:
    code, out, _ = run("collections", "create", collection_name, "--description", "API reference", "--json")
    assert code == 0 and json.loads(out)["description"] == "API reference"
    code, out, _ = run("collections", "list", "--json")
    assert collection_name in [c["name"] for c in json.loads(out)]
    code, out, _ = run("collections", "list")
    assert collection_name in out and "API reference" in out
    code, _, err = run("collections", "create", collection_name)
    assert code == 2 and "already exists" in err
    assert run("collections", "delete", collection_name)[0] == 0
    code, _, err = run("collections", "delete", collection_name)
    assert code == 2 and "no collection" in err


def test_ingest_reports_and_exit_code_says_some_failed(
    run: Any, collection_name: str, tmp_path: Path
) -> None:
    (tmp_path / "a.md").write_text("# A\nAlpha text about pagination cursors.")
    (tmp_path / "b.txt").write_bytes(b"\xff\xfe bad bytes")
    code, out, _ = run(
        "ingest",
        str(tmp_path),
        "--collection",
        collection_name,
        "--create",
        "--json",
        "--metadata",
        "team=docs",
    )
    report = json.loads(out)
    assert code == 1
    assert [Path(s).name for s in report["added"]] == ["a.md"]
    assert [Path(f["source"]).name for f in report["failed"]] == ["b.txt"]
    (tmp_path / "b.txt").unlink()
    code, out, _ = run("ingest", str(tmp_path), "--collection", collection_name, "-m", "team=docs")
    assert code == 0 and "0 added" in out and "1 unchanged" in out
    code, out, _ = run("ingest", str(tmp_path), "--collection", collection_name, "-m", "team=api")
    assert code == 0 and "1 replaced" in out  # changed metadata replaces the document
    code, out, _ = run("documents", "list", "--collection", collection_name, "--json")
    (doc,) = json.loads(out)
    assert doc["metadata"] == {"team": "api"} and doc["chunk_count"] == 1
    assert run("documents", "delete", doc["id"])[0] == 0
    code, out, _ = run("documents", "list", "--collection", collection_name, "--json")
    assert json.loads(out) == []


def test_ingest_into_a_missing_collection_is_a_clear_error(run: Any, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("text")
    code, _, err = run("ingest", str(tmp_path), "--collection", "does_not_exist")
    assert code == 2 and "no collection named 'does_not_exist'" in err


def test_bad_metadata_flag_is_a_usage_error(run: Any, collection_name: str, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="key=value"):
        run("ingest", str(tmp_path), "--collection", collection_name, "--create", "--metadata", "novalue")


def test_ingest_with_the_bf16_backend_is_searched_by_the_default_embedder(
    run: Any, database_url: str, collection_name: str, tmp_path: Path
) -> None:
    """The bulk-ingest backend writes vectors the default (float32 onnx) query embedder matches:
    same version, so no mismatch, and the nearest chunk is found."""
    import torch

    if not (torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()):
        pytest.skip("this CPU has no native bfloat16")
    (tmp_path / "pages.md").write_text("# Pagination\n\nEvery list endpoint pages with an opaque cursor.")
    (tmp_path / "limits.md").write_text(
        "# Rate limits\n\nA client over its limit gets HTTP 429 and Retry-After."
    )
    code, out, _ = run(
        "ingest", str(tmp_path), "-c", collection_name, "--create", "--backend", "torch-bf16", "--json"
    )
    assert code == 0 and len(json.loads(out)["added"]) == 2
    default = Store(database_url)  # LocalEmbedder(): float32 onnx queries
    try:
        result = default.search(
            "what happens when I exceed the rate limit", collections=collection_name, mode="vector"
        )
        assert result.model_version_match and not result.warnings
        assert result.hits[0].source.endswith("limits.md")
        coll = default.collection(collection_name)
        assert coll.embed_version == default.embedder.version
    finally:
        default.close()


# ---- the layout: one module per command group, a parser that imports nothing heavy -------------
HEAVY = (
    "torch",
    "transformers",
    "sentence_transformers",
    "onnxruntime",
    "litellm",
    "fastapi",
    "uvicorn",
    "langgraph",
    "ray",
    "mcp",
    "docx",
    "agentrag.eval.report",  # agentrag eval's runs and reports: only when the command runs (issue #39)
    "agentrag.eval.run",
    "agentrag.eval.beir",
)


def test_building_the_parser_imports_no_heavy_library() -> None:
    code = (
        "import argparse, sys\n"
        "from agentrag.cli import build_parser\n"
        "parser = build_parser()\n"
        "commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
        "print('serve' in commands, 'ingest' in commands)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "True True"]  # the server extension's commands registered too


def test_every_command_module_is_a_registered_group() -> None:
    package = Path(cli.__file__).parent
    modules = {p.stem for p in package.glob("*.py")} - {"__init__", "common"}
    assert {group.__name__.rpartition(".")[2] for group in cli.GROUPS} == modules
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert list(commands)[:14] == [
        "db",
        "collections",
        "ingest",
        "reembed",
        "sync",
        "documents",
        "acl",
        "search",
        "ask",
        "chat",
        "relations",
        "log",
        "eval",
        "demo",
    ]
