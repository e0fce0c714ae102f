"""benchmarks/multilingual.py end to end on a slice of XQuAD-dev, so the benchmark cannot rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "xquad-dev"


@pytest.mark.skipif(not DATA.is_dir(), reason="XQuAD-dev is not beside the checkout (../shared/data)")
def test_the_multilingual_benchmark_runs_on_a_slice(tmp_path: Path) -> None:
    out = tmp_path / "ml.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.multilingual",
            "--languages",
            "de,zh",
            "--articles",
            "3",
            "--left-out",
            "1",
            "--questions",
            "4",
            "--unanswerable",
            "2",
            "--cross",
            "en:de",
            "--bare",
            "de",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        env={**os.environ, "AGENTRAG_BENCH_DATABASE": "agentrag_bench_multilingual_test"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(out.read_text(encoding="utf-8"))
    assert set(results["languages"]) == {"de", "zh"}
    for row in results["languages"].values():
        assert row["passages"] == 10  # two articles of five paragraphs kept
        for key in ("first", "top5", "fact_hit", "refused", "unanswerable_answered"):
            assert 0.0 <= row[key] <= 1.0
        assert row["top5"] >= row["first"]
    assert "bare_embed_per_s" in results["languages"]["de"]
    assert set(results["cross"]) == {"en:de"}
    assert "| de |" in run.stdout and "cross-lingual en:de" in run.stdout
