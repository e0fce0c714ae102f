"""Issue #38 item 6: a quiet first run. `make demo` installs nothing outside .venv; the programs
only the tests need (Chromium, Tesseract) come from `make test`'s own target."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _recipes(target: str) -> str:
    """Every command `make TARGET` would run on a fresh clone (-B: as if nothing were built; -n: run none)."""
    done = subprocess.run(["make", "-n", "-B", target], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_demo_installs_nothing_outside_the_venv() -> None:
    demo = _recipes("demo")
    assert "pip install" in demo and "agentrag demo" in demo  # it does set up and run the demo
    assert "apt-get" not in demo and "sudo" not in demo


def test_make_test_installs_the_test_programs_first() -> None:
    test = _recipes("test")
    assert "install -y -qq chromium" in test and "tesseract-ocr" in test
    assert "apt-get -o DPkg::Lock::Timeout=300 install" in test  # waits for another apt run's lock
    assert test.index("tesseract-ocr") < test.index("pytest")
