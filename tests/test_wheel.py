"""The packaging a release ships: build the wheel, install it with its extras into a fresh
virtualenv, and run ``agentrag demo`` and a search there, away from the checkout.

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

from tests.conftest import REPO

pytestmark = pytest.mark.slow


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
        ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", ".mypy_cache", "build"),
    )
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w",
         str(dist), str(source)],
        cwd=source,
    )  # fmt: skip
    (built,) = dist.glob("agentrag-*.whl")
    return built


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


def test_an_installed_wheel_runs_the_demo_and_a_search(wheel: Path, tmp_path: Path) -> None:
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
         f"agentrag[local,embedded] @ {wheel.as_uri()}"],
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
    imported = _run([str(python), "-c", "import agentrag; print(agentrag.__file__)"], cwd=workdir, env=env)
    assert imported.startswith(str(site)), imported  # the wheel's copy, not the checkout's
    agentrag = str(venv / "bin" / "agentrag")
    try:
        out = _run([agentrag, "demo"], cwd=workdir, env=env)
        assert f"ingesting the sample corpus from {site / 'agentrag' / '_data' / 'samples'}" in out
        assert "product_docs: 12 added" in out and "Q: How do I paginate" in out
        assert "citations:\n    [chk_" in out
        out = _run([agentrag, "search", "rate limit 429 Retry-After", "-c", "api"], cwd=workdir, env=env)
        assert "in api: 5 hits" in out and "rate-limits" in out
    finally:
        subprocess.run([agentrag, "db", "stop"], cwd=workdir, env=env, capture_output=True, timeout=120)
