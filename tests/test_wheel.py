"""The packaging a release ships: build the wheel, install it with its extras into a fresh
virtualenv, and run ``agentrag demo``, a search and an ``agentrag ask`` there, from an empty
directory away from the checkout, offline. ``make test`` runs it (it is marked slow, and ``make
test`` deselects nothing).

Offline and without downloading: the wheel is built with ``--no-build-isolation`` (hatchling is a
dev dependency), and the new virtualenv sees the test environment's installed packages through a
``.pth`` line (pip too), so ``pip install --no-index 'agentrag[local,embedded] @ wheel'`` finds every
dependency of the extras already installed and installs agentrag itself from the wheel only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from agentrag._version import __version__
from tests.conftest import REPO

pytestmark = pytest.mark.slow

# every extra `make setup` installs but dev: the wheel must install with each of them
EXTRAS = "local,embedded,pdf,readers,ocr,server,mcp,langgraph,tokens,pandas,ray,sync"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def _run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    source = (
        tmp_path_factory.mktemp("source") / "agentrag"
    )  # a copy: the build writes nothing in the checkout
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(  # what is not source, and caches other processes write meanwhile
            ".venv",
            ".git",
            "__pycache__",
            "*.egg-info",
            ".mypy_cache",
            ".ruff_cache",
            ".pytest_cache",
            ".hypothesis",
            "build",
            "dist",
            "site",
        ),
    )
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w",
         str(dist), str(source)],
        cwd=source,
    )  # fmt: skip
    (built,) = dist.glob("agentrag-*.whl")
    return built


def test_the_wheel_carries_the_version_and_metadata(wheel: Path) -> None:
    assert wheel.name.startswith(f"agentrag-{__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        (meta,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(meta).decode()
        licenses = [n for n in archive.namelist() if n.endswith("licenses/LICENSE")]
    assert f"\nVersion: {__version__}\n" in metadata and "\nLicense-Expression: MIT\n" in metadata
    assert "\nClassifier: Typing :: Typed\n" in metadata and "\nKeywords: " in metadata
    assert "\nDescription-Content-Type: text/markdown\n" in metadata and licenses


def test_the_wheel_carries_the_package_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "agentrag/_data/samples/collections.json",
        "agentrag/_data/samples/support/recover-deleted-note.md",
        "agentrag/_data/prompts/answer.j2",
        "agentrag/samples.py",
        "agentrag/cli/__init__.py",
    ):
        assert needed in names, needed
    assert any(n.startswith("agentrag/_data/migrations/") and n.endswith(".sql") for n in names)
    assert not any(n.startswith(("tests/", "samples/")) for n in names)


def test_an_installed_wheel_runs_the_demo_a_search_and_an_ask(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    # without pip: its own (older) pip and setuptools would shadow the environment's (torch needs a newer
    # setuptools); pip runs from the environment's packages, installing into the new virtualenv
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=tmp_path).strip())  # fmt: skip
    # the test environment's packages (torch, sentence-transformers, pgserver, ...), after the venv's own
    (site / "zz_test_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-index", "--disable-pip-version-check",
         f"agentrag[{EXTRAS}] @ {wheel.as_uri()}"],
        cwd=tmp_path,
    )  # fmt: skip
    workdir = tmp_path / "elsewhere"  # no samples/ here: the demo must find the wheel's own
    workdir.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("AGENTRAG_DATABASE_URL", "AGENTRAG_LLM", "PYTHONPATH")
    }
    env["AGENTRAG_DATA_DIR"] = str(tmp_path / "data")
    env.update(OFFLINE)
    imported = _run([str(python), "-c", "import agentrag; print(agentrag.__file__)"], cwd=workdir, env=env)
    assert imported.startswith(str(site)), imported  # the wheel's copy, not the checkout's
    agentrag = str(venv / "bin" / "agentrag")
    try:
        out = _run([agentrag, "demo"], cwd=workdir, env=env)
        assert f"ingesting the sample corpus from {site / 'agentrag' / '_data' / 'samples'}" in out
        assert "demo_product_docs: 12 added" in out and "Q: How do I paginate" in out
        assert "citations:\n    [chk_" in out
        out = _run([agentrag, "search", "rate limit 429 Retry-After", "-c", "demo_api"], cwd=workdir, env=env)
        assert "in demo_api: 5 hits" in out and "rate-limits" in out
        out = _run(
            [agentrag, "ask", "How do I recover a deleted note?", "-c", "demo_support"], cwd=workdir, env=env
        )
        assert "[chk_" in out and "trash" in out.lower(), out  # an extractive answer, cited
        assert _run([agentrag, "--version"], cwd=workdir, env=env).strip() == f"agentrag {__version__}"
        assert sorted(p.name for p in workdir.iterdir()) == []  # nothing written where it ran
    finally:
        stop = [agentrag, "db", "stop", "--force"]
        subprocess.run(stop, cwd=workdir, env=env, capture_output=True, timeout=120)
