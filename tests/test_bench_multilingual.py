"""benchmarks/multilingual.py end to end on a slice of XQuAD-dev, so the benchmark cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.xquad_support import DATA, run_benchmark


@pytest.mark.skipif(not DATA.is_dir(), reason="XQuAD-dev is not beside the checkout (../shared/data)")
def test_the_multilingual_benchmark_runs_on_a_slice(tmp_path: Path) -> None:
    out = tmp_path / "ml.json"
    argv = ["--languages", "de,zh", "--articles", "3", "--left-out", "1", "--questions", "4"]
    argv += ["--unanswerable", "2", "--cross", "en:de", "--bare", "de", "--json", str(out)]
    run = run_benchmark("multilingual", argv)
    results = json.loads(out.read_text(encoding="utf-8"))
    assert set(results["languages"]) == {"de", "zh"}
    for row in results["languages"].values():
        assert row["passages"] == 10  # two articles of five paragraphs kept
        for key in ("first", "top5", "fact_hit", "refused", "unanswerable_answered"):
            assert 0.0 <= row[key] <= 1.0
        assert row["top5"] >= row["first"]
    assert "bare_embed_per_s" in results["languages"]["de"]
    # default settings: a collection declared in German or Chinese is embedded by the multilingual model
    assert {row["embed_model"] for row in results["languages"].values()} == {"intfloat/multilingual-e5-small"}
    assert set(results["cross"]) == {"en:de"}
    assert "| de |" in run.stdout and "cross-lingual en:de" in run.stdout


@pytest.mark.skipif(not DATA.is_dir(), reason="XQuAD-dev is not beside the checkout (../shared/data)")
def test_the_abstention_fit_runs_on_a_slice(tmp_path: Path) -> None:
    out = tmp_path / "fit.json"
    argv = ["--languages", "de", "--kept", "2", "--questions", "4", "--unanswerable", "3", "--json", str(out)]
    run = run_benchmark("multilingual_abstention", argv)
    row = json.loads(out.read_text(encoding="utf-8"))["languages"]["de"]
    assert 0.0 <= row["threshold"] <= 1.0
    assert len(row["confidences"]["fit"]) == len(row["confidences"]["report"]) == 7
    for key in ("fact_hit", "refused", "unanswerable_answered"):
        assert 0.0 <= row["report"][key] <= 1.0 and 0.0 <= row["report_before"][key] <= 1.0
    assert "| de |" in run.stdout
