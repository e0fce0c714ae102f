"""Running an XQuAD-dev benchmark module on a slice, as the benchmark tests do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "xquad-dev"


def run_benchmark(module: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``python -m benchmarks.<module> *argv`` from the checkout, in the benchmarks' test database;
    its exit status checked (stderr's tail shown when it fails)."""
    run = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *argv],
        cwd=ROOT,
        env={**os.environ, "AGENTRAG_BENCH_DATABASE": "agentrag_bench_multilingual_test"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run
