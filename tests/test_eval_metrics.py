"""IR metrics and evaluation reports, checked against hand-computed values.

Notation in the comments: DCG = sum(gain_r / log2(r + 1)) over ranks r = 1, 2, ...; so the
discounts are log2(2) = 1, log2(3) = 1.5849625, log2(4) = 2, log2(5) = 2.3219281.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentrag.errors import InvalidInputError
from agentrag.eval import (
    DEFAULT_K_VALUES,
    Comparison,
    EvalReport,
    QueryEval,
    citation_precision,
    compare,
    dcg,
    evaluate_rankings,
    grounded_rate,
    hit_at_k,
    mrr,
    ndcg_at_k,
    precision_at_k,
    rank_by_score,
    recall_at_k,
)
from agentrag.eval.significance import paired_randomization_test, paired_t_test, student_t_sf

INV_LOG2_3 = 1 / math.log2(3)  # 0.6309297535714575, the discount factor at rank 2


# -- nDCG -----------------------------------------------------------------------------------------------


def test_dcg_of_gains() -> None:
    # 3/log2(2) + 2/log2(3) + 1/log2(4) = 3 + 1.2618595 + 0.5 = 4.7618595
    assert dcg([3, 2, 1]) == pytest.approx(3 + 2 * INV_LOG2_3 + 0.5)
    assert dcg([]) == 0.0


def test_ndcg_binary() -> None:
    # ranked a, x, b with a and b relevant (grade 1):
    # DCG  = 1/log2(2) + 0/log2(3) + 1/log2(4) = 1 + 0 + 0.5 = 1.5
    # IDCG = 1/log2(2) + 1/log2(3)             = 1 + 0.6309298 = 1.6309298
    # nDCG = 1.5 / 1.6309298 = 0.9197208
    assert ndcg_at_k(["a", "x", "b"], {"a": 1, "b": 1}, 3) == pytest.approx(0.9197207891481876)


def test_ndcg_graded_uses_linear_gain() -> None:
    # grades a=2, b=1, c=0 (c judged non-relevant); ranked b, c, a:
    # DCG  = 1/log2(2) + 0/log2(3) + 2/log2(4) = 1 + 0 + 1 = 2
    # IDCG = 2/log2(2) + 1/log2(3)             = 2 + 0.6309298 = 2.6309298
    # nDCG = 2 / 2.6309298 = 0.7601875
    # (exponential gain 2**g - 1 would give (1 + 3/2) / (3 + 0.6309298) = 0.6885, so this pins linear gain)
    assert ndcg_at_k(["b", "c", "a"], {"a": 2, "b": 1, "c": 0}, 3) == pytest.approx(0.7601875334318685)


def test_ndcg_graded_swapped_pair() -> None:
    # grades a=2, b=1; ranked b, a:
    # DCG  = 1/1 + 2/log2(3) = 1 + 1.2618595 = 2.2618595
    # IDCG = 2/1 + 1/log2(3) = 2 + 0.6309298 = 2.6309298
    # nDCG = 2.2618595 / 2.6309298 = 0.8597187
    assert ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, 2) == pytest.approx(0.8597186998521972)


def test_ndcg_perfect_ranking_is_one() -> None:
    assert ndcg_at_k(["a", "b", "x"], {"a": 2, "b": 1}, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["a", "b"], {"a": 1, "b": 1}, 1) == pytest.approx(1.0)


def test_ndcg_ideal_is_cut_at_k() -> None:
    # grades a=2, b=1, ranked b, a, k=1:
    # DCG@1 = 1/1 = 1; IDCG@1 = 2/1 = 2 (only the best grade fits in the top 1); nDCG = 0.5
    assert ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, 1) == pytest.approx(0.5)


def test_ndcg_relevant_doc_outside_k() -> None:
    # a is at rank 3: cut at k=2 it is not seen -> DCG = 0 -> nDCG = 0
    assert ndcg_at_k(["x", "y", "a"], {"a": 1}, 2) == 0.0
    # at k=3: DCG = 1/log2(4) = 0.5; IDCG = 1/log2(2) = 1; nDCG = 0.5
    assert ndcg_at_k(["x", "y", "a"], {"a": 1}, 3) == pytest.approx(0.5)


def test_ndcg_k_larger_than_ranking() -> None:
    # one of two relevant docs retrieved, list of 1, k=10:
    # DCG = 1/1 = 1; IDCG = 1 + 1/log2(3) = 1.6309298; nDCG = 1 / 1.6309298 = 0.6131472
    assert ndcg_at_k(["a"], {"a": 1, "b": 1}, 10) == pytest.approx(0.6131471927654584)
    assert ndcg_at_k([], {"a": 1}, 10) == 0.0


def test_no_relevant_docs_gives_none_for_every_metric() -> None:
    for qrels in ({}, {"a": 0}, {"a": -1, "b": 0}):
        ranked = ["a", "b"]
        assert ndcg_at_k(ranked, qrels, 10) is None
        assert recall_at_k(ranked, qrels, 10) is None
        assert precision_at_k(ranked, qrels, 10) is None
        assert hit_at_k(ranked, qrels, 10) is None
        assert mrr(ranked, qrels) is None


def test_non_positive_grades_are_non_relevant() -> None:
    # b has grade 0, c grade -1: only a counts. ranked c, b, a:
    # DCG = 0 + 0 + 1/log2(4) = 0.5; IDCG = 1; nDCG = 0.5
    qrels = {"a": 1, "b": 0, "c": -1}
    assert ndcg_at_k(["c", "b", "a"], qrels, 3) == pytest.approx(0.5)
    assert recall_at_k(["c", "b"], qrels, 2) == 0.0


def test_duplicates_count_once() -> None:
    # x, x, a dedups to x, a: a at rank 2 -> DCG = 1/log2(3) = 0.6309298; IDCG = 1; nDCG@2 = 0.6309298
    # (counting the copy would push a out of the top 2 and give 0)
    assert ndcg_at_k(["x", "x", "a"], {"a": 1}, 2) == pytest.approx(INV_LOG2_3)
    # a, a with a and b relevant: dedups to [a]; DCG = 1; IDCG = 1 + 0.6309298; nDCG = 0.6131472
    # (counting the copy twice would give (1 + 0.6309298) / 1.6309298 = 1.0)
    assert ndcg_at_k(["a", "a"], {"a": 1, "b": 1}, 2) == pytest.approx(0.6131471927654584)
    assert precision_at_k(["a", "a"], {"a": 1, "b": 1}, 2) == pytest.approx(0.5)  # 1 relevant / k=2
    assert recall_at_k(["a", "a"], {"a": 1, "b": 1}, 2) == pytest.approx(0.5)  # 1 found / 2 relevant
    assert mrr(["x", "x", "a"], {"a": 1}, k=2) == pytest.approx(0.5)  # a is at rank 2 once deduplicated


# -- recall, precision, MRR, hit ------------------------------------------------------------------------

RANKED = ["x", "a", "y", "b", "z"]
QRELS = {"a": 1, "b": 2, "c": 1}  # 3 relevant docs; c is never retrieved


def test_recall_at_k() -> None:
    assert recall_at_k(RANKED, QRELS, 1) == 0.0  # top 1 = {x}: 0 of 3
    assert recall_at_k(RANKED, QRELS, 2) == pytest.approx(1 / 3)  # {x, a}: 1 of 3
    assert recall_at_k(RANKED, QRELS, 5) == pytest.approx(2 / 3)  # a and b: 2 of 3 (grade does not matter)
    assert recall_at_k(RANKED, QRELS, 100) == pytest.approx(2 / 3)


def test_precision_at_k() -> None:
    assert precision_at_k(RANKED, QRELS, 1) == 0.0  # 0 / 1
    assert precision_at_k(RANKED, QRELS, 2) == pytest.approx(0.5)  # 1 / 2
    assert precision_at_k(RANKED, QRELS, 5) == pytest.approx(0.4)  # 2 / 5
    assert precision_at_k(RANKED, QRELS, 10) == pytest.approx(0.2)  # 2 / 10: divides by k, not by 5 retrieved


def test_mrr() -> None:
    assert mrr(RANKED, QRELS) == pytest.approx(0.5)  # first relevant (a) at rank 2 -> 1/2
    assert mrr(RANKED, QRELS, k=2) == pytest.approx(0.5)
    assert mrr(RANKED, QRELS, k=1) == 0.0  # rank 2 is beyond k=1
    assert mrr(["q", "r", "s", "b"], QRELS) == pytest.approx(0.25)  # rank 4 -> 1/4
    assert mrr([], QRELS) == 0.0


def test_hit_at_k() -> None:
    assert hit_at_k(RANKED, QRELS, 1) == 0.0
    assert hit_at_k(RANKED, QRELS, 2) == 1.0
    assert hit_at_k(RANKED, QRELS, 100) == 1.0


def test_bad_k() -> None:
    with pytest.raises(InvalidInputError):
        ndcg_at_k(RANKED, QRELS, 0)
    with pytest.raises(InvalidInputError):
        recall_at_k(RANKED, QRELS, -3)
    with pytest.raises(TypeError):
        precision_at_k(RANKED, QRELS, 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        hit_at_k(RANKED, QRELS, True)


# -- ties -----------------------------------------------------------------------------------------------


def test_rank_by_score_breaks_ties_by_doc_id_descending() -> None:
    scores = {"d1": 1.0, "d3": 2.0, "d2": 1.0, "d10": 1.0}
    # d3 has the best score; d1, d2, d10 tie at 1.0 and go by id descending as strings: "d2" > "d10" > "d1"
    assert rank_by_score(scores) == ["d3", "d2", "d10", "d1"]
    assert rank_by_score(scores, k=2) == ["d3", "d2"]
    # the tie order decides the metric: d1 ends up at rank 4 -> nDCG = 1/log2(5) = 0.4306766
    assert ndcg_at_k(rank_by_score(scores), {"d1": 1}, 4) == pytest.approx(1 / math.log2(5))
    # ... and d2 at rank 2 -> 1/log2(3) = 0.6309298
    assert ndcg_at_k(rank_by_score(scores), {"d2": 1}, 4) == pytest.approx(INV_LOG2_3)


def test_rank_by_score_does_not_depend_on_insertion_order() -> None:
    scores = {"b": 0.5, "a": 0.5, "c": 0.5, "z": 0.1}
    assert rank_by_score(scores) == rank_by_score(dict(reversed(scores.items()))) == ["c", "b", "a", "z"]


def test_rank_by_score_rejects_nan() -> None:
    with pytest.raises(InvalidInputError, match="'b'"):
        rank_by_score({"a": 1.0, "b": float("nan")})


# -- answer metrics -------------------------------------------------------------------------------------


def test_citation_precision() -> None:
    assert citation_precision(3, 4) == pytest.approx(0.75)
    assert citation_precision(0, 2) == 0.0
    assert citation_precision(0, 0) is None
    with pytest.raises(InvalidInputError):
        citation_precision(5, 4)
    with pytest.raises(InvalidInputError):
        citation_precision(-1, 4)


def test_grounded_rate() -> None:
    assert grounded_rate([True, False, True, True]) == pytest.approx(0.75)  # 3 / 4
    assert grounded_rate([False]) == 0.0
    assert grounded_rate([]) is None


# -- properties -----------------------------------------------------------------------------------------

DOC_IDS = [f"d{i}" for i in range(12)]
qrels_strategy = st.dictionaries(st.sampled_from(DOC_IDS), st.integers(min_value=-1, max_value=3), max_size=8)
ranking_strategy = st.lists(st.sampled_from(DOC_IDS), max_size=15)
k_strategy = st.integers(min_value=1, max_value=20)


@given(ranking_strategy, qrels_strategy, k_strategy)
def test_metrics_are_within_unit_interval(ranked: list[str], qrels: dict[str, int], k: int) -> None:
    has_relevant = any(grade > 0 for grade in qrels.values())
    values = [
        ndcg_at_k(ranked, qrels, k),
        recall_at_k(ranked, qrels, k),
        precision_at_k(ranked, qrels, k),
        hit_at_k(ranked, qrels, k),
        mrr(ranked, qrels, k),
        mrr(ranked, qrels),
    ]
    for value in values:
        if not has_relevant:
            assert value is None
        else:
            assert value is not None
            assert 0.0 <= value <= 1.0 + 1e-12


@given(qrels_strategy, k_strategy)
def test_ndcg_of_ideal_ordering_is_one(qrels: dict[str, int], k: int) -> None:
    ideal = sorted((doc for doc, grade in qrels.items() if grade > 0), key=lambda doc: -qrels[doc])
    value = ndcg_at_k(ideal, qrels, k)
    if not ideal:
        assert value is None
    else:
        assert value == pytest.approx(1.0)


@given(qrels_strategy, st.data(), k_strategy)
def test_permuting_non_relevant_tail_changes_nothing(qrels: dict[str, int], data: Any, k: int) -> None:
    relevant = [doc for doc in DOC_IDS if qrels.get(doc, 0) > 0]
    head = data.draw(st.permutations(relevant))
    tail = [doc for doc in DOC_IDS if doc not in relevant]
    one = head + data.draw(st.permutations(tail))
    two = head + data.draw(st.permutations(tail))
    for metric in (ndcg_at_k, recall_at_k, precision_at_k, hit_at_k, mrr):
        assert metric(one, qrels, k) == metric(two, qrels, k)


@given(st.dictionaries(st.sampled_from(DOC_IDS), st.sampled_from([0.0, 0.5, 1.0, 2.5]), max_size=12))
def test_rank_by_score_orders_by_score_then_id_descending(scores: dict[str, float]) -> None:
    ranked = rank_by_score(scores)
    assert sorted(ranked) == sorted(scores)
    for first, second in itertools.pairwise(ranked):
        assert (scores[first], first) > (scores[second], second)


# -- reports --------------------------------------------------------------------------------------------


def _report(**overrides: Any) -> EvalReport:
    args: dict[str, Any] = {
        "name": "bm25",
        "config": {"k1": 1.2},
        "rankings": {"q1": ["a", "x"], "q2": ["x", "b"], "q3": ["a"]},
        "qrels": {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"a": 0}},
        "queries": {"q1": "first", "q2": "second", "q3": "no relevant doc"},
        "k_values": (1, 10),
        "latencies_ms": {"q1": 10.0, "q2": 20.0, "q3": 30.0},
    }
    args.update(overrides)
    return evaluate_rankings(
        args.pop("name"),
        args.pop("config"),
        args.pop("rankings"),
        args.pop("qrels"),
        args.pop("queries"),
        **args,
    )


def test_evaluate_rankings_metric_keys() -> None:
    report = _report()
    assert list(report.per_query[0].metrics) == [
        "ndcg@1",
        "ndcg@10",
        "recall@1",
        "recall@10",
        "precision@1",
        "precision@10",
        "hit@1",
        "hit@10",
        "mrr@1",
        "mrr@10",
    ]
    assert DEFAULT_K_VALUES == (1, 5, 10, 100)
    default = evaluate_rankings("x", {}, {"q": ["a"]}, {"q": {"a": 1}})
    assert "ndcg@100" in default.per_query[0].metrics and "mrr@5" in default.per_query[0].metrics


def test_summary_means_skip_undefined_queries() -> None:
    report = _report()
    q3 = report.per_query[2]
    assert q3.query_id == "q3" and q3.metrics["ndcg@10"] is None
    summary = report.summary()
    # q1: a at rank 1 -> nDCG 1.0; q2: b at rank 2 -> nDCG 1/log2(3) = 0.6309298; q3 undefined (skipped)
    # mean = (1.0 + 0.6309298) / 2 = 0.8154649   (were q3 counted as 0 it would be 0.5436)
    assert summary["ndcg@10"] == pytest.approx((1.0 + INV_LOG2_3) / 2)
    # mrr@10 = (1/1 + 1/2) / 2 = 0.75; hit@1 = (1 + 0) / 2 = 0.5; precision@10 = (1/10 + 1/10) / 2 = 0.1
    assert summary["mrr@10"] == pytest.approx(0.75)
    assert summary["hit@1"] == pytest.approx(0.5)
    assert summary["precision@10"] == pytest.approx(0.1)
    assert summary["queries"] == 3
    # latencies 10, 20, 30 ms: qps = 3 queries / 0.060 s = 50
    # p50: position (3 - 1) * 0.50 = 1.0  -> 20
    # p99: position (3 - 1) * 0.99 = 1.98 -> 20 + 0.98 * (30 - 20) = 29.8
    assert summary["qps"] == pytest.approx(50.0)
    assert summary["p50_ms"] == pytest.approx(20.0)
    assert summary["p99_ms"] == pytest.approx(29.8)


def test_summary_without_latencies_and_all_undefined() -> None:
    report = _report(qrels={"q3": {"a": 0}}, latencies_ms=None)
    summary = report.summary()
    assert summary == {"queries": 1.0}  # every metric undefined -> left out; no latency keys


def test_missing_ranking_scores_zero_and_extra_rankings_are_ignored() -> None:
    report = evaluate_rankings("r", {}, {"other": ["a"]}, {"q1": {"a": 1}}, k_values=(10,))
    assert [r.query_id for r in report.per_query] == ["q1"]
    assert report.per_query[0].metrics["ndcg@10"] == 0.0
    assert report.per_query[0].retrieved == ()
    assert report.per_query[0].query == ""


def test_retrieved_is_deduplicated_and_cut_at_largest_k() -> None:
    report = evaluate_rankings("r", {}, {"q": ["a", "a", "b", "c", "d"]}, {"q": {"a": 1}}, k_values=(1, 3))
    assert report.per_query[0].retrieved == ("a", "b", "c")


def test_evaluate_rankings_rejects_bad_input() -> None:
    with pytest.raises(InvalidInputError):
        evaluate_rankings("r", {}, {}, {"q": {"a": 1}}, k_values=())
    with pytest.raises(InvalidInputError):
        evaluate_rankings("r", {}, {}, {"q": {"a": 1}}, k_values=(0, 10))
    with pytest.raises(TypeError):
        evaluate_rankings("r", {}, {"q": "abc"}, {"q": {"a": 1}})


XSS = '<script>alert("x")</script>'


def test_html_escapes_everything() -> None:
    report = _report(
        name="<b>bm25</b>",
        config={"<img>": "<svg onload=1>"},
        queries={"q1": XSS, "q2": "a & b", "q3": "plain"},
    )
    rendered = report._repr_html_()
    assert "<script>" not in rendered
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in rendered
    assert "<b>bm25" not in rendered and "&lt;b&gt;bm25&lt;/b&gt;" in rendered
    assert "<img>" not in rendered and "<svg" not in rendered
    assert "a &amp; b" in rendered
    assert rendered.count("<table>") >= 2  # the summary grid and the per-query table


def test_markdown_escapes() -> None:
    report = _report(name="a|b <script>", queries={"q1": XSS, "q2": "x", "q3": "y"})
    rendered = report._repr_markdown_()
    assert "<script>" not in rendered
    assert "a\\|b &lt;script&gt;" in rendered
    assert "| ndcg |" in rendered


def test_text_renderings() -> None:
    report = _report()
    text = str(report)
    assert text.startswith("EvalReport: bm25")
    assert "ndcg" in text and "@10" in text and "0.8155" in text  # mean nDCG@10 from above
    assert "qps 50.0" in text
    assert repr(report) == (
        "EvalReport('bm25', queries=3, ndcg@10=0.8155, mrr@10=0.7500, qps=50.0, p50_ms=20.00)"
    )


def test_to_dict_is_json_serialisable() -> None:
    report = _report(config={"path": Path("/tmp/x"), "ks": (1, 2), "obj": object(), "nan": float("nan")})
    data = json.loads(json.dumps(report.to_dict()))
    assert data["name"] == "bm25"
    assert data["config"]["path"] == "/tmp/x" and data["config"]["ks"] == [1, 2]
    assert data["config"]["nan"] is None
    assert data["summary"]["ndcg@10"] == pytest.approx((1.0 + INV_LOG2_3) / 2)
    assert data["per_query"][2]["metrics"]["ndcg@10"] is None
    assert data["per_query"][0]["retrieved"] == ["a", "x"]


def test_report_is_frozen() -> None:
    report = _report()
    with pytest.raises(AttributeError):
        report.name = "other"  # type: ignore[misc]
    assert isinstance(report.per_query[0], QueryEval)


def test_to_pandas_without_pandas_raises_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # makes `import pandas` raise ImportError
    with pytest.raises(ImportError, match=r"pandas.*agentrag\[pandas\]"):
        _report().to_pandas()
    with pytest.raises(ImportError, match=r"pandas.*agentrag\[pandas\]"):
        compare([_report()]).to_pandas()


def test_to_pandas_when_installed() -> None:
    pytest.importorskip("pandas")
    frame = _report().to_pandas()
    assert list(frame.index) == ["q1", "q2", "q3"]
    assert frame.loc["q2", "ndcg@10"] == pytest.approx(INV_LOG2_3)


# -- comparisons ----------------------------------------------------------------------------------------


def test_compare_rows_and_renderings() -> None:
    fast = _report(name="fast", latencies_ms={"q1": 1.0, "q2": 1.0, "q3": 1.0})
    good = _report(name="<script>good</script>", rankings={"q1": ["a"], "q2": ["b"], "q3": []})
    comparison = compare([fast, good])
    assert isinstance(comparison, Comparison)
    rows = comparison.rows()
    assert [row["name"] for row in rows] == ["fast", "<script>good</script>"]
    assert rows[0]["ndcg@10"] == pytest.approx((1.0 + INV_LOG2_3) / 2)
    assert rows[1]["ndcg@10"] == pytest.approx(1.0)
    assert rows[0]["recall@100"] is None  # k_values were (1, 10)
    assert rows[0]["qps"] == pytest.approx(1000.0)  # 3 queries / 0.003 s
    assert rows[0]["queries"] == 3

    html_text = comparison._repr_html_()
    assert "<script>" not in html_text and "&lt;script&gt;good&lt;/script&gt;" in html_text
    assert "<strong>1.0000</strong>" in html_text  # best nDCG@10 is bold
    assert "<strong>1,000.0</strong>" in html_text  # best qps is bold
    assert "<strong>1.00</strong>" in html_text  # lowest p50 is bold

    markdown = comparison._repr_markdown_()
    assert "<script>" not in markdown and "**1.0000**" in markdown

    text = str(comparison)
    assert text.splitlines()[0].split() == [
        "name",
        "queries",
        "ndcg@10",
        "recall@100",
        "qps",
        "p50_ms",
        "p99_ms",
        "p_rand",
        "p_t",
    ]
    assert rows[0]["p_rand"] is None and 0 < rows[1]["p_rand"] <= 1 and 0 < rows[1]["p_t"] <= 1
    assert "p_rand" not in comparison._best() and "p_t" not in comparison._best()  # never bold
    assert repr(comparison) == "Comparison(2 reports: 'fast', '<script>good</script>')"
    assert json.loads(json.dumps(comparison.to_dict()))["rows"][1]["ndcg@10"] == pytest.approx(1.0)


def test_compare_custom_columns_and_empty() -> None:
    comparison = compare([_report()], columns=["mrr@10"])
    assert comparison.rows() == [{"name": "bm25", "queries": 3, "mrr@10": pytest.approx(0.75)}]
    with pytest.raises(InvalidInputError):
        compare([])


def test_compare_significance_options() -> None:
    one, two = _report(name="one"), _report(name="two", rankings={"q1": ["a"], "q2": ["b"], "q3": []})
    assert "p_rand" not in compare([one, two], significance=None).rows()[1]
    assert compare([one, two], significance="mrr@10").rows()[1]["p_t"] is not None
    assert compare([one, two], baseline="two").rows()[1]["p_t"] is None
    with pytest.raises(InvalidInputError, match="metric"):
        compare([one, two], significance="ndcg@7")
    with pytest.raises(InvalidInputError, match="baseline"):
        compare([one, two], baseline="three")
    with pytest.raises(InvalidInputError, match="baseline"):
        compare([one, two], baseline=2)
    with pytest.raises(InvalidInputError, match="distinct names"):
        compare([one, one])
    with pytest.raises(InvalidInputError, match="n_permutations"):
        compare([one, two], n_permutations=0)


# -- paired significance --------------------------------------------------------------------------------


def test_paired_t_test_matches_scipy() -> None:
    import random

    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(7)
    for n, shift in ((5, 0.3), (30, 0.05), (300, 0.02), (300, 0.0)):
        a = [rng.random() for _ in range(n)]
        b = [x + shift + rng.gauss(0, 0.2) for x in a]
        assert paired_t_test(a, b) == pytest.approx(stats.ttest_rel(b, a).pvalue, rel=1e-6, abs=1e-12)
    for t, df in ((0.5, 3), (2.0, 10), (4.0, 299), (-3.0, 7)):
        assert student_t_sf(t, df) == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-7)


def test_paired_tests_edge_cases() -> None:
    assert paired_t_test([0.1, 0.5], [0.1, 0.5]) == 1.0
    assert paired_t_test([0.0, 0.5, 0.25], [0.25, 0.75, 0.5]) == 0.0  # the same gain on every query
    assert paired_randomization_test([0.3, 0.4], [0.3, 0.4]) == 1.0
    with pytest.raises(InvalidInputError):
        paired_t_test([0.1], [0.1, 0.2])
    with pytest.raises(InvalidInputError):
        paired_randomization_test([], [])


def test_paired_randomization_test_approaches_the_exact_permutation_p_value() -> None:
    import itertools

    a = [0.2, 0.5, 0.1, 0.9, 0.4, 0.3, 0.6, 0.7]
    b = [0.4, 0.6, 0.1, 0.95, 0.7, 0.2, 0.9, 0.8]
    d = [y - x for x, y in zip(a, b, strict=True)]
    observed = abs(sum(d))
    flips = list(itertools.product((-1, 1), repeat=len(d)))
    exact = sum(abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed - 1e-12 for signs in flips)
    exact_p = exact / len(flips)
    estimate = paired_randomization_test(a, b, n_permutations=20_000, seed=3)
    assert estimate == pytest.approx(exact_p, abs=0.01)
    assert paired_randomization_test(a, b, n_permutations=20_000, seed=3) == estimate  # seeded
    assert paired_randomization_test(b, a, n_permutations=20_000, seed=3) == estimate  # two-sided
