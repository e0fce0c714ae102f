"""Model rerankers in the rerank step: a tiny cross-encoder built here, a hosted reranker through the
local stub (litellm's cohere / jina_ai rerank routes), and a user's Reranker. Real PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import agentrag as ar
from agentrag.errors import InvalidInputError, RerankError
from agentrag.rerankers import APIReranker, CrossEncoderReranker, rerank_hits
from tests.grounded_support import Traced, attributes
from tests.openai_stub import OpenAIStub, error, rerank_results
from tests.pipeline_fixtures import Q_COMPARE, sample_store
from tests.tiny_models import save_tiny_bert

__all__ = ["sample_store"]  # the fixture is used by name

WORDS = [
    "the",
    "a",
    "and",
    "of",
    "to",
    "for",
    "is",
    "are",
    "in",
    "on",
    "plan",
    "plans",
    "team",
    "business",
    "support",
    "response",
    "times",
    "api",
    "rate",
    "limit",
    "limits",
    "requests",
    "notes",
    "page",
    "cursor",
    "compare",
    "between",
]


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A one-layer BERT cross-encoder with random weights and a 27-word vocabulary, saved to a
    temporary directory: a real model directory for sentence-transformers, with no download."""
    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    return str(save_tiny_bert(path, WORDS, seed=0, classifier=True, max_positions=128))


def searched(store: ar.Store, **options: Any) -> ar.Context:
    return ar.new(Q_COMPARE, store=store, limit=8, **options).search(collections=["support", "api"])


def direct_scores(model_dir: str, query: str, texts: Sequence[str]) -> list[float]:
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(model_dir, device="cpu")
    return [float(s) for s in model.predict([(query, t) for t in texts], show_progress_bar=False)]


# ---- cross-encoder ---------------------------------------------------------------------------------
def test_cross_encoder_scores_are_the_models_whatever_the_batch(tiny_cross_encoder: str) -> None:
    texts = ["api rate limit for team plans", "support response times", "notes page cursor", "the plan"]
    expected = direct_scores(tiny_cross_encoder, "rate limit", texts)
    assert len(set(expected)) == len(expected)  # distinct, so an order follows from them
    for batch_size in (1, 3, 32):
        got = CrossEncoderReranker(tiny_cross_encoder, batch_size=batch_size).rerank("rate limit", texts)
        assert got == pytest.approx(expected, abs=1e-5)
    assert CrossEncoderReranker(tiny_cross_encoder).rerank("q", []) == []


def test_rerank_step_with_a_cross_encoder_orders_by_its_scores(
    sample_store: ar.Store, tiny_cross_encoder: str, traced: Traced
) -> None:
    base = searched(sample_store, telemetry=traced.telemetry)
    fused = list(base.hits)
    assert len(fused) >= 6
    ctx = base.rerank(strategy="cross-encoder", model=tiny_cross_encoder, batch_size=4)
    assert ctx.ok and ctx.degradations == () and ctx.steps[-1].strategy == "cross-encoder"
    ranked = ctx.ranked
    assert ranked is not None and [h.rank for h in ranked] == list(range(1, len(ranked) + 1))
    assert {h.chunk_id for h in ranked} == {h.chunk_id for h in fused}
    expected = dict(
        zip(
            [h.chunk_id for h in fused],
            direct_scores(tiny_cross_encoder, Q_COMPARE, [h.text for h in fused]),
            strict=True,
        )
    )
    assert [h.rerank_score for h in ranked] == pytest.approx([expected[h.chunk_id] for h in ranked], abs=1e-5)
    assert [h.chunk_id for h in ranked] == sorted(expected, key=lambda c: -expected[c])
    span = attributes(traced.span("agentrag.rerank"))
    assert span["agentrag.rerank.model"] == tiny_cross_encoder
    assert list(span["agentrag.rerank.scores"]) == pytest.approx([h.rerank_score for h in ranked], abs=1e-5)
    assert span["agentrag.rerank.candidates"] == len(ranked)


def test_only_the_top_candidates_are_scored_the_rest_follow_in_fused_order(
    sample_store: ar.Store, tiny_cross_encoder: str
) -> None:
    base = searched(sample_store)
    fused = [h.chunk_id for h in base.hits]
    ranked = base.rerank(strategy="cross-encoder", model=tiny_cross_encoder, candidates=3, top_k=5).ranked
    assert ranked is not None and len(ranked) == 5
    assert {h.chunk_id for h in ranked[:3]} == set(fused[:3])
    assert all(h.rerank_score is not None for h in ranked[:3])
    assert [h.chunk_id for h in ranked[3:]] == fused[3:5]
    assert all(h.rerank_score is None for h in ranked[3:])


def test_a_cross_encoder_that_cannot_load_degrades_to_the_heuristic(
    sample_store: ar.Store, tmp_path: Path, traced: Traced
) -> None:
    base = searched(sample_store, telemetry=traced.telemetry)
    heuristic = base.rerank().ranked
    ctx = base.rerank(strategy="cross-encoder", model=str(tmp_path / "no-such-model"))
    assert ctx.ok and ctx.ranked == heuristic
    assert ctx.steps[-1].strategy == "heuristic"
    assert [(d.step, d.kind) for d in ctx.degradations] == [("rerank", "heuristic")]
    assert "RerankError" in ctx.degradations[0].reason
    span = attributes(traced.spans("agentrag.rerank")[-1])
    assert span["agentrag.degraded"] is True and span["agentrag.mode"] == "heuristic"
    assert "RerankError" in span["agentrag.degraded_reason"] and "agentrag.rerank.scores" not in span


# ---- hosted rerankers through the stub -------------------------------------------------------------
@pytest.mark.parametrize(
    "model", ["cohere/rerank-english-v3.0", "jina_ai/jina-reranker-v2-base-multilingual"]
)
def test_api_reranker_through_litellm_and_the_stub(
    sample_store: ar.Store, openai_stub: OpenAIStub, model: str
) -> None:
    base = searched(sample_store)
    fused = list(base.hits)
    scores = [float((7 * i) % len(fused)) for i in range(len(fused))]  # a permutation of 0..n-1
    openai_stub.enqueue(rerank_results(scores, order=list(range(len(fused)))))  # listed unsorted on purpose
    ctx = base.rerank(strategy="api", model=model, api_base=openai_stub.url, api_key="sk-test")
    assert ctx.ok and ctx.degradations == () and ctx.steps[-1].strategy == "api"
    (request,) = openai_stub.requests_to("/rerank")
    assert request.json["query"] == Q_COMPARE
    assert request.json["documents"] == [h.text for h in fused]
    assert request.json["model"] == model.split("/", 1)[1]
    by_score = sorted(range(len(fused)), key=lambda i: -scores[i])
    assert ctx.ranked is not None
    assert [h.chunk_id for h in ctx.ranked] == [fused[i].chunk_id for i in by_score]
    assert [h.rerank_score for h in ctx.ranked] == [scores[i] for i in by_score]


def test_api_reranker_failures_degrade(sample_store: ar.Store, openai_stub: OpenAIStub) -> None:
    base = searched(sample_store)
    heuristic = base.rerank().ranked
    n = len(base.hits)
    reranker = APIReranker("cohere/rerank-english-v3.0", api_base=openai_stub.url, api_key="sk-test")
    openai_stub.enqueue(error(400, "bad model"), rerank_results([1.0] * (n - 1)))
    for expected in ("BadRequest", "scored"):
        ctx = base.rerank(reranker=reranker)
        assert ctx.ok and ctx.ranked == heuristic
        assert [(d.step, d.kind) for d in ctx.degradations] == [("rerank", "heuristic")]
        assert expected in ctx.degradations[0].reason
    with pytest.raises(RerankError, match="scored"):
        openai_stub.enqueue(rerank_results([1.0]))
        reranker.rerank("q", ["a", "b"])


# ---- a user's reranker -------------------------------------------------------------------------------
class ByLength:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls.append((query, list(texts)))
        return [float(len(t)) for t in texts]


def test_a_user_reranker_is_used_through_the_protocol(sample_store: ar.Store) -> None:
    base = searched(sample_store)
    mine = ByLength()
    assert isinstance(mine, ar.Reranker)
    ctx = base.rerank(reranker=mine, top_k=4)
    assert mine.calls == [(Q_COMPARE, [h.text for h in base.hits])]
    assert ctx.steps[-1].strategy == "custom" and ctx.ranked is not None and len(ctx.ranked) == 4
    lengths = sorted((len(h.text) for h in base.hits), reverse=True)[:4]
    assert [len(h.text) for h in ctx.ranked] == lengths
    assert [h.rerank_score for h in ctx.ranked] == [float(n) for n in lengths]


@pytest.mark.parametrize(
    "scores", [[1.0], [float("nan")] * 8, ["high"] * 8], ids=["too-few", "not-finite", "not-numbers"]
)
def test_unusable_scores_from_a_user_reranker_degrade(sample_store: ar.Store, scores: list[Any]) -> None:
    class Bad:
        def rerank(self, query: str, texts: Sequence[str]) -> list[Any]:
            return scores[: len(texts)] if len(scores) > 1 else scores

    base = searched(sample_store)
    ctx = base.rerank(reranker=Bad())
    assert ctx.ranked == base.rerank().ranked
    assert [(d.step, d.kind) for d in ctx.degradations] == [("rerank", "heuristic")]


def test_reranker_options_are_checked_at_the_call(sample_store: ar.Store) -> None:
    base = searched(sample_store)
    with pytest.raises(InvalidInputError, match="strategy"):
        base.rerank(strategy="colbert")
    with pytest.raises(InvalidInputError, match="model="):
        base.rerank(strategy="api")
    with pytest.raises(InvalidInputError, match="rerank"):
        base.rerank(reranker=object())
    with pytest.raises(InvalidInputError, match="no strategy or model"):
        base.rerank(reranker=ByLength(), strategy="api")
    with pytest.raises(InvalidInputError, match="candidates"):
        base.rerank(strategy="cross-encoder", candidates=0)
    with pytest.raises(InvalidInputError, match="does not take api_base"):
        base.rerank(strategy="cross-encoder", api_base="http://127.0.0.1:1")
    with pytest.raises(InvalidInputError, match="does not take batch_size"):
        base.rerank(batch_size=2)
    with pytest.raises(TypeError, match="unknown option"):
        base.rerank(bacth_size=2)


def test_rerank_hits_keeps_the_fused_order_on_ties(sample_store: ar.Store) -> None:
    class Flat:
        def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
            return [0.5] * len(texts)

    hits = searched(sample_store).hits
    out = rerank_hits(Flat(), "q", hits, candidates=4)
    assert [h.chunk_id for h in out] == [h.chunk_id for h in hits]
    assert [h.rank for h in out] == list(range(1, len(hits) + 1))
    assert [h.rerank_score for h in out] == [0.5] * 4 + [None] * (len(hits) - 4)
