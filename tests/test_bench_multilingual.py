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


def test_rotation_leaves_every_article_out_once() -> None:
    from benchmarks.multilingual import split

    articles = list("abcdef")
    assert split(articles, 2, None) == (list("abcd"), list("ef"))  # without --rotate: the last block out
    blocks = [split(articles, 2, fold) for fold in range(3)]
    assert [out for _, out in blocks] == [list("ab"), list("cd"), list("ef")]
    for kept, out in blocks:
        assert sorted(kept + out) == articles and not set(kept) & set(out)


def test_the_folds_rates_are_pooled_over_their_questions() -> None:
    from benchmarks.multilingual import pooled

    one = {"first": 1.0, "top5": 1.0, "fact_hit": 0.5, "refused": 0.25, "unanswerable_answered": 0.0}
    two = {"first": 0.5, "top5": 1.0, "fact_hit": 1.0, "refused": 0.0, "unanswerable_answered": 0.5}
    one["ingest_per_s"], two["ingest_per_s"] = 10.0, 20.0
    row = pooled([(one, 4, 1), (two, 12, 3)])  # 4 answerable + 1 unanswerable, then 12 + 3
    assert row["first"] == 0.625 and row["fact_hit"] == 0.875 and row["refused"] == 0.062
    assert row["unanswerable_answered"] == 0.375  # weighed by the unanswerable questions: 1.5 of 4
    assert (row["folds"], row["answerable"], row["unanswerable"], row["ingest_per_s"]) == (2, 16, 4, 15.0)
    assert pooled([(one, 4, 1)]) is one  # one fold: its own row


@pytest.mark.skipif(not DATA.is_dir(), reason="XQuAD-dev is not beside the checkout (../shared/data)")
def test_the_rotation_runs_on_a_slice(tmp_path: Path) -> None:
    out = tmp_path / "rot.json"
    argv = ["--languages", "de", "--articles", "2", "--left-out", "1", "--rotate", "--questions", "3"]
    argv += ["--unanswerable", "2", "--cross", "", "--bare", "", "--json", str(out)]
    run_benchmark("multilingual", argv)
    row = json.loads(out.read_text(encoding="utf-8"))["languages"]["de"]
    assert (row["folds"], row["answerable"], row["unanswerable"]) == (2, 6, 4)
    assert row["passages"] == 5  # one article of five paragraphs kept in each block's collection
    for key in ("first", "top5", "fact_hit", "refused", "unanswerable_answered"):
        assert 0.0 <= row[key] <= 1.0
