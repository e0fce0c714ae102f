"""The evaluation runner on the real test database: BEIR ingestion, search and pipeline evaluation."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentrag.context import Context
from agentrag.errors import CollectionNotFoundError, InvalidInputError
from agentrag.eval import (
    EvalProgress,
    EvalReport,
    compare,
    evaluate,
    evaluate_rankings,
    ingest_beir,
    load_beir,
    subset,
)
from agentrag.retrieval.result import SearchResult
from agentrag.store.store import Store
from agentrag.testing import FakeLLM

MINI = Path(__file__).resolve().parents[1] / "samples" / "beir_mini"


@pytest.fixture(scope="module")
def mini() -> Any:
    return load_beir(MINI)


@pytest.fixture(scope="module")
def mini_collection(store: Store, mini: Any) -> Iterator[str]:
    """The mini set indexed once; removed afterwards (other tests search every collection)."""
    name = "evalrun_mini"
    report = ingest_beir(store, mini, name)
    assert report.ok and len(report.added) == len(mini.corpus)
    yield name
    store.delete_collection(name)


@pytest.fixture
def scratch(store: Store) -> Iterator[str]:
    """A collection name for one test, deleted afterwards whatever happens."""
    name = "evalrun_" + uuid.uuid4().hex[:8]
    yield name
    with contextlib.suppress(CollectionNotFoundError):
        store.delete_collection(name)


def test_ingest_beir_one_chunk_per_document_keyed_by_beir_id(
    store: Store, mini: Any, mini_collection: str
) -> None:
    coll = store.collection(mini_collection)
    assert coll.document_count == coll.chunk_count == len(mini.corpus) == 40
    assert "BEIR beir_mini" in coll.description
    docs = store.documents(mini_collection, limit=100)
    assert sorted(d.source for d in docs) == sorted(mini.corpus)
    first = store.document(next(d.id for d in docs if d.source == "mini001"))
    assert first.text == mini.corpus["mini001"].index_text


def test_ingest_beir_is_idempotent_and_reports_progress(
    store: Store, mini: Any, mini_collection: str
) -> None:
    events: list[Any] = []
    again = ingest_beir(store, mini, mini_collection, on_progress=events.append)
    assert again.ok and not again.changed and len(again.unchanged) == 40
    assert [e.status for e in events] == ["unchanged"] * 40 and events[-1].done == events[-1].total == 40


def test_ingest_beir_prune_drops_documents_outside_the_corpus(store: Store, mini: Any, scratch: str) -> None:
    name = scratch
    ingest_beir(store, mini, name)
    small = subset(mini, queries=2, distractors=3)
    assert store.collection(name).document_count == 40
    report = ingest_beir(store, small, name, prune=True)
    assert report.ok and not report.changed
    assert sorted(d.source for d in store.documents(name)) == sorted(small.corpus)


def test_subset_keeps_judged_documents_plus_distractors(mini: Any) -> None:
    small = subset(mini, queries=3, distractors=5, seed=1)
    assert list(small.queries) == list(load_beir(MINI, sample=3, seed=1).queries)
    judged = {doc for docs in small.qrels.values() for doc in docs}
    assert judged <= set(small.corpus)
    assert len(small.corpus) == len(judged) + 5
    assert subset(mini, queries=3, distractors=5, seed=1) == small
    assert subset(mini) == mini
    with pytest.raises(InvalidInputError):
        subset(mini, queries=0)


def test_evaluate_rrf_fusion_is_the_searches_with_that_fusion(
    store: Store, mini: Any, mini_collection: str
) -> None:
    report = evaluate(store, mini, mini_collection, mode="hybrid", fusion="rrf", top_k=5)
    assert report.name == "hybrid (rrf)" and report.config["fusion"] == "rrf"
    options: dict[str, Any] = {"collections": mini_collection, "top_k": 5, "fusion": "rrf"}
    searched = {qid: [h.source for h in store.search(q, **options)] for qid, q in mini.queries.items()}
    assert {r.query_id: list(r.retrieved) for r in report.per_query} == searched
    default = evaluate(store, mini, mini_collection, mode="hybrid", top_k=5)
    assert default.name == "hybrid" and default.config["fusion"] == "relative_score"
    with pytest.raises(InvalidInputError, match="fusion"):
        evaluate(store, mini, mini_collection, fusion="linear")


@pytest.mark.parametrize("mode", ["vector", "lexical", "lexical_sql", "hybrid"])
def test_evaluate_matches_scoring_the_searches_by_hand(
    store: Store, mini: Any, mini_collection: str, mode: str
) -> None:
    report = evaluate(store, mini, mini_collection, mode=mode, top_k=5)
    assert isinstance(report, EvalReport) and report.name == mode
    assert report.config == {
        "dataset": "beir_mini",
        "split": "test",
        "collection": mini_collection,
        "mode": mode,
        "top_k": 5,
        "depth": 100,
        **({"fusion": "relative_score"} if mode == "hybrid" else {}),
    }
    rankings = {
        qid: [h.source for h in store.search(q, collections=mini_collection, mode=mode, top_k=5)]
        for qid, q in mini.queries.items()
    }
    expected = evaluate_rankings(mode, {}, rankings, mini.qrels, mini.queries, k_values=(1, 5))
    assert [r.retrieved for r in report.per_query] == [r.retrieved for r in expected.per_query]
    summary = report.summary()
    assert summary["ndcg@5"] == pytest.approx(expected.summary()["ndcg@5"])
    assert summary["queries"] == 10 and summary["p50_ms"] > 0 and summary["qps"] > 0
    assert "ndcg@10" not in summary  # only cut-offs up to top_k
    assert all(r.latency_ms is not None and r.latency_ms > 0 for r in report.per_query)


def test_lexical_retrieval_on_the_mini_set_is_good(store: Store, mini: Any, mini_collection: str) -> None:
    report = evaluate(store, mini, mini_collection, mode="lexical", top_k=10)
    assert report.summary()["ndcg@10"] > 0.7
    assert report.summary()["hit@10"] == 1.0


def test_evaluate_sample_progress_and_k_values(store: Store, mini: Any, mini_collection: str) -> None:
    events: list[EvalProgress] = []
    report = evaluate(
        store,
        mini,
        mini_collection,
        mode="lexical",
        sample=4,
        seed=3,
        k_values=(1, 3),
        on_progress=events.append,
    )
    chosen = list(load_beir(MINI, sample=4, seed=3).queries)
    assert [r.query_id for r in report.per_query] == chosen
    assert [e.query_id for e in events] == chosen and [e.done for e in events] == [1, 2, 3, 4]
    assert all(isinstance(e.result, SearchResult) and e.total == 4 for e in events)
    assert set(report.per_query[0].metrics) == {
        f"{m}@{k}" for m in ("ndcg", "recall", "precision", "hit", "mrr") for k in (1, 3)
    }
    assert report.config["sample"] == 4 and report.config["seed"] == 3
    json.dumps(report.to_dict())  # serialisable


def test_multi_chunk_documents_are_deduplicated_at_their_best_rank(
    store: Store, mini: Any, scratch: str
) -> None:
    name = scratch
    ingest_beir(store, mini, name, chunk_size=120)
    assert store.collection(name).chunk_count > 40
    report = evaluate(store, mini, name, mode="lexical", top_k=20)
    for result in report.per_query:
        assert len(result.retrieved) == len(set(result.retrieved))
        first = store.search(result.query, collections=name, mode="lexical", top_k=20)
        order: list[str] = []
        for h in first:
            if h.source not in order:
                order.append(h.source or "")
        assert list(result.retrieved) == order


def test_evaluate_a_pipeline_adds_answer_metrics(store: Store, mini: Any, mini_collection: str) -> None:
    def reply(messages: list[dict[str, str]]) -> str:
        import re

        labels = re.findall(r"\[(chk_[0-9a-f]+)\]", "\n".join(m["content"] for m in messages))
        return f"Corals calcify less in acid water [{labels[0]}]. Also see [chk_0000000000000000]."

    seen: list[Context] = []

    def pipeline(ctx: Context) -> Context:
        out = ctx.search().answer()
        seen.append(out)
        return out

    report = evaluate(
        store,
        mini,
        mini_collection,
        mode="lexical",
        top_k=5,
        pipeline=pipeline,
        llm=FakeLLM(fn=reply),
        sample=3,
    )
    assert report.name == "pipeline" and report.config["pipeline"] == "pipeline"
    assert report.config["llm"] == "fake" and "depth" not in report.config
    assert len(seen) == 3 + 1  # one warm-up run
    for result, ctx in zip(report.per_query, seen[1:], strict=True):
        assert ctx.options.collections == (mini_collection,) and ctx.options.limit == 5
        assert result.metrics["citation_precision"] == pytest.approx(0.5)  # one valid, one invalid citation
        assert result.metrics["grounded"] == 0.0 and result.metrics["failed"] == 0.0
        assert list(result.retrieved) == list(dict.fromkeys(h.source for h in ctx.hits))
    summary = report.summary()
    assert summary["citation_precision"] == pytest.approx(0.5) and summary["grounded"] == 0.0
    assert "citation_precision" in str(report)


def test_evaluate_pipeline_without_llm_is_extractive(store: Store, mini: Any, mini_collection: str) -> None:
    report = evaluate(
        store,
        mini,
        mini_collection,
        top_k=3,
        mode="lexical",
        pipeline=lambda c: c.search().answer(),
        warmup=0,
    )
    summary = report.summary()
    # an extractive reply either quotes what was retrieved (grounded, every citation valid) or abstains
    answered = [r for r in report.per_query if r.metrics["abstained"] == 0.0]
    assert answered, "every claim abstained"
    assert all(r.metrics["grounded"] == 1.0 and r.metrics["citation_precision"] == 1.0 for r in answered)
    abstained = [r for r in report.per_query if r.metrics["abstained"] == 1.0]
    assert all(r.metrics["grounded"] is None and r.metrics["citation_precision"] is None for r in abstained)
    assert summary["abstained"] == pytest.approx(len(abstained) / len(report.per_query))
    assert summary["grounded"] == 1.0 and summary["citation_precision"] == 1.0 and summary["failed"] == 0.0


def test_compare_renders_the_modes(store: Store, mini: Any, mini_collection: str) -> None:
    reports = [
        evaluate(store, mini, mini_collection, mode=m, warmup=0) for m in ("vector", "lexical", "hybrid")
    ]
    table = str(compare(reports, columns=("ndcg@10", "recall@10", "p50_ms")))
    assert [line.split()[0] for line in table.splitlines()] == ["name", "vector", "lexical", "hybrid"]


def test_evaluate_rejects_bad_arguments(store: Store, mini: Any, mini_collection: str) -> None:
    with pytest.raises(CollectionNotFoundError):
        evaluate(store, mini, "evalrun_missing")
    with pytest.raises(InvalidInputError):
        evaluate(store, mini, mini_collection, mode="fuzzy")
    with pytest.raises(InvalidInputError):
        evaluate(store, mini, mini_collection, top_k=0)
    with pytest.raises(InvalidInputError):
        evaluate(store, mini, mini_collection, top_k=60, pipeline=lambda c: c.search())
    with pytest.raises(InvalidInputError):
        evaluate(store, mini, mini_collection, llm=FakeLLM(["x"]))
    with pytest.raises(TypeError, match="must return a Context"):
        evaluate(store, mini, mini_collection, pipeline=lambda c: None, warmup=0)  # type: ignore[arg-type,return-value]


# -- the command line ------------------------------------------------------------------------------------


@pytest.fixture
def cli_store(store: Store, monkeypatch: pytest.MonkeyPatch) -> Store:
    from agentrag import cli

    monkeypatch.setattr(cli.common, "open_store", lambda args: store)
    return store


def test_cli_eval_beir_compare_prints_the_table(
    cli_store: Store, scratch: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentrag import cli

    code = cli.main(["eval", "beir", str(MINI), "--compare", "vector,lexical,hybrid", "-c", scratch])
    assert code == 0
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert lines[0].split() == [
        "name",
        "queries",
        "ndcg@10",
        "recall@10",
        "mrr@10",
        "qps",
        "p50_ms",
        "p99_ms",
        "p_rand",
        "p_t",
    ]
    assert lines[-1].startswith("p_rand / p_t: two-sided paired") and "against 'vector'" in lines[-1]
    lines = lines[:-1]
    assert [line.split()[0] for line in lines[1:]] == ["vector", "lexical", "hybrid"]
    assert all(line.split()[1] == "10" for line in lines[1:])
    assert lines[1].split()[-2:] == ["-", "-"]  # the baseline has no p-value against itself
    assert "BEIR beir_mini (test): 10 queries, 40 documents" in captured.err
    assert "40 added" in captured.err
    # the same figures as the library
    mini = load_beir(MINI)
    lexical = evaluate(cli_store, mini, scratch, mode="lexical").summary()["ndcg@10"]
    assert f"{lexical:.4f}" in lines[2]
    # a second run re-uses the index
    assert cli.main(["eval", "beir", str(MINI), "--mode", "lexical", "-c", scratch, "--sample", "3"]) == 0
    captured = capsys.readouterr()
    assert "40 unchanged" in captured.err
    assert captured.out.startswith("EvalReport: lexical") and "queries 3" in captured.out


def test_cli_eval_beir_json(cli_store: Store, scratch: str, capsys: pytest.CaptureFixture[str]) -> None:
    from agentrag import cli

    assert (
        cli.main(["eval", "beir", str(MINI), "--mode", "lexical", "--top-k", "5", "--json", "-c", scratch])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["dataset"] == "beir_mini" and data["collection"] == scratch
    assert data["ingest"]["added"] == 40 and data["ingest"]["failed"] == []
    assert data["comparison"]["columns"] == [
        "name",
        "queries",
        "ndcg@5",
        "recall@5",
        "mrr@5",
        "qps",
        "p50_ms",
        "p99_ms",
    ]
    (report,) = data["reports"]
    assert report["config"]["top_k"] == 5 and len(report["per_query"]) == 10


def test_cli_eval_beir_rejects_bad_modes_and_paths(
    cli_store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentrag import cli

    with pytest.raises(SystemExit):
        cli.main(["eval", "beir", str(MINI), "--compare", "vector,fuzzy"])
    assert "expected comma-separated modes" in capsys.readouterr().err
    assert cli.main(["eval", "beir", str(tmp_path)]) == 2
    assert "not a BEIR dataset" in capsys.readouterr().err


def test_the_embedder_is_warmed_on_every_query_when_the_mode_embeds(
    store: Store, mini: Any, mini_collection: str, fake_embedder: Any
) -> None:
    def embed_calls(**options: Any) -> list[list[str]]:
        before = len(fake_embedder.calls)
        evaluate(store, mini, mini_collection, sample=3, warmup=0, **options)
        return fake_embedder.calls[before:]

    chosen = list(load_beir(MINI, sample=3).queries.values())
    assert embed_calls(mode="vector") == [[q] for q in chosen] * 2  # warm-up, then the timed searches
    assert embed_calls(mode="hybrid", warm_embedder=False) == [[q] for q in chosen]
    assert embed_calls(mode="lexical") == []


# -- rerankers, fusions, splits and the pipeline report ---------------------------------------------


class Shortest:
    """A reranker preferring short texts: an order unlike the fused one, easy to recompute."""

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        return [-float(len(t)) for t in texts]


def test_evaluate_with_a_reranker_scores_the_reranked_candidates(
    store: Store, mini: Any, mini_collection: str
) -> None:
    from agentrag.rerankers import rerank_hits

    report = evaluate(store, mini, mini_collection, top_k=5, reranker=Shortest(), candidates=20, warmup=0)
    assert report.name == "hybrid + rerank(Shortest)"
    assert report.config["reranker"] == "Shortest" and report.config["candidates"] == 20
    expected = {}
    for qid, query in mini.queries.items():
        hits = store.search(query, collections=mini_collection, top_k=20)
        expected[qid] = [h.source for h in rerank_hits(Shortest(), hits.query, hits.hits, candidates=20)[:5]]
    assert {r.query_id: list(r.retrieved) for r in report.per_query} == expected
    plain = evaluate(store, mini, mini_collection, top_k=5, warmup=0)
    assert [r.retrieved for r in plain.per_query] != [r.retrieved for r in report.per_query]


def test_evaluate_reranker_failures_and_misuse_raise(store: Store, mini: Any, mini_collection: str) -> None:
    from agentrag.errors import RerankError

    class Broken:
        def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
            return [1.0]

    with pytest.raises(RerankError, match="1 scores"):
        evaluate(store, mini, mini_collection, reranker=Broken(), warmup=0)
    with pytest.raises(InvalidInputError, match="rerank step"):
        evaluate(store, mini, mini_collection, reranker=Shortest(), pipeline=lambda c: c.search())
    with pytest.raises(InvalidInputError, match="reranker must"):
        evaluate(store, mini, mini_collection, reranker=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="candidates"):
        evaluate(store, mini, mini_collection, reranker=Shortest(), candidates=0)


def test_compare_reports_paired_p_values_against_the_baseline(
    store: Store, mini: Any, mini_collection: str
) -> None:
    from agentrag.eval.significance import paired_randomization_test, paired_t_test

    reports = [evaluate(store, mini, mini_collection, mode=m, warmup=0) for m in ("hybrid", "lexical_sql")]
    comparison = compare(reports)
    base = [r.metrics["ndcg@10"] for r in reports[0].per_query]
    other = [r.metrics["ndcg@10"] for r in reports[1].per_query]
    rows = comparison.rows()
    assert rows[0]["p_rand"] is None and rows[0]["p_t"] is None
    assert rows[1]["p_t"] == pytest.approx(paired_t_test(base, other))  # type: ignore[arg-type]
    assert rows[1]["p_rand"] == paired_randomization_test(base, other)  # type: ignore[arg-type]
    flipped = compare(reports, baseline="lexical_sql").rows()
    assert flipped[1]["p_rand"] is None and flipped[0]["p_t"] == pytest.approx(rows[1]["p_t"])


def test_cli_eval_compares_fusions_a_hosted_reranker_and_the_pipeline(
    cli_store: Store,
    scratch: str,
    openai_stub: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agentrag import cli
    from agentrag.rerankers import APIReranker

    monkeypatch.setenv("COHERE_API_KEY", "sk-test")
    argv = ["eval", "beir", str(MINI), "-c", scratch, "--compare", "hybrid,hybrid:rrf", "--json"]
    argv += ["--rerank", "api:cohere/rerank-english-v3.0", "--rerank-api-base", openai_stub.url]
    argv += ["--rerank-candidates", "20", "--pipeline"]
    assert cli.main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["comparison"]["rows"]
    names = [row["name"] for row in rows]
    assert names == ["hybrid", "hybrid (rrf)", "hybrid + rerank(cohere/rerank-english-v3.0)", "pipeline"]
    assert {"p_rand", "p_t", "citation_precision", "grounded"} <= set(data["comparison"]["columns"])
    assert rows[0]["p_rand"] is None and all(0 < row["p_rand"] <= 1 for row in rows[1:])
    # extractive answers: what is answered is grounded and cited precisely, the rest abstains
    assert rows[3]["citation_precision"] == 1.0 and rows[3]["grounded"] == 1.0
    assert 0.0 <= rows[3]["abstained"] < 1.0 and rows[0].get("abstained") is None
    # the reranked row is the library's figure with the same reranker
    mini = load_beir(MINI)
    reranker = APIReranker("cohere/rerank-english-v3.0", api_base=openai_stub.url)
    same = evaluate(cli_store, mini, scratch, reranker=reranker, candidates=20).summary()
    assert rows[2]["ndcg@10"] == pytest.approx(same["ndcg@10"])
    assert len(openai_stub.requests_to("/rerank")) >= 2 * len(mini.queries)


def test_cli_eval_any_qrels_split(
    cli_store: Store, scratch: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    from agentrag import cli

    data = tmp_path / "beir_mini"
    shutil.copytree(MINI, data)
    lines = (MINI / "qrels" / "test.tsv").read_text().splitlines()
    kept = [lines[0], *[line for line in lines[1:] if line.split("\t")[0] in {"q1", "q2", "q3"}]]
    kept = kept if len(kept) > 1 else lines[:4]
    (data / "qrels" / "dev.tsv").write_text("\n".join(kept) + "\n")
    dev_queries = {line.split("\t")[0] for line in kept[1:]}
    assert cli.main(["eval", "beir", str(data), "--split", "dev", "--mode", "lexical", "-c", scratch]) == 0
    captured = capsys.readouterr()
    assert f"(dev): {len(dev_queries)} queries" in captured.err
    assert f"queries {len(dev_queries)}" in captured.out
    assert cli.main(["eval", "beir", str(data), "--split", "train", "-c", scratch]) == 2
    assert "train" in capsys.readouterr().err
