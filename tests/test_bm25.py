"""The lexical leg's tokenizer and in-memory BM25 index (small corpora only)."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import bm25s
import numpy as np
import pytest
import Stemmer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrag.retrieval import bm25 as bm25_module
from agentrag.retrieval import tokenize as tokenize_module
from agentrag.retrieval.bm25 import BACKENDS, DEFAULT_BACKEND, BM25Index
from agentrag.retrieval.tokenize import STOPWORDS_EN, tokenize, tokenize_many

BOTH = ["bm25s", "rank_bm25"]

# Every content word occurs in fewer than half of the documents, so rank_bm25's idf is
# positive everywhere and its ranking can be compared with bm25s'.
CORPUS = [
    "Photosynthesis converts light energy into chemical energy in plants.",
    "Mitochondria are the powerhouse of the cell and produce ATP.",
    "Statins lower LDL cholesterol and reduce cardiovascular risk.",
    "The cell membrane controls what enters and leaves the cell.",
    "Vitamin supplements do not reduce cardiovascular mortality in adults.",
    "Chlorophyll absorbs light for photosynthesis in the chloroplast.",
    "Regular exercise lowers blood pressure and cholesterol.",
    "Neurons transmit signals across synapses with neurotransmitters.",
    "Antibiotics kill bacteria but do not work against viruses.",
    "Deep sleep consolidates memory in the hippocampus.",
    "Insulin regulates blood glucose levels after a meal.",
    "Viruses replicate inside host cells using the cell machinery.",
]

QUERIES = [
    "photosynthesis",
    "light energy in plants",
    "cardiovascular risk of cholesterol",
    "cell",
    "blood pressure and glucose",
    "do antibiotics work against viruses?",
    "memory consolidation during sleep",
]

HOSTILE = [
    "",
    " ",
    "\n\t\r",
    "'",
    '"',
    "''''",
    '"unterminated',
    "a & b | !c",
    "(foo & bar) | !(baz:*)",
    "foo:* & !bar <-> baz",
    "!!!&&&|||:::***((()))",
    "'; DROP TABLE chunks; --",
    "%_\\%_",
    "\x00\x01\x02 null bytes \x00",
    "\ud800 lone surrogate \udfff",
    "\u200b\u200c\u200d\ufeff zero width",
    "مرحبا بالعالم",  # right-to-left
    "日本語のテキスト",
    "😀😃😄 emoji 👩‍👩‍👧‍👦 family 🏳️‍🌈",
    "İstanbul ǅemal ﬁnding Ｆｕｌｌｗｉｄｔｈ Ⅻ ⑩",
    "a" * 10_000,
    "😀" * 3_000,
    "word " * 2_000,
    "'&|!():*\"" * 1_200,
    "\u0301" * 5_000,
    "x\u0301" * 5_000,
]


def _index(backend: str, texts: list[str] = CORPUS, **kwargs: object) -> BM25Index:
    return BM25Index.build(texts, backend=backend, **kwargs)  # type: ignore[arg-type]


def _lucene_scores(texts: list[str], query: str, k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """BM25 as Lucene scores it (Kamphuis et al. 2020), straight from the formula."""
    docs = [Counter(doc) for doc in tokenize_many(texts)]
    lengths = [sum(doc.values()) for doc in docs]
    n, avgdl = len(docs), sum(lengths) / len(docs)
    out = np.zeros(n)
    for term in tokenize(query):
        df = sum(1 for doc in docs if term in doc)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, doc in enumerate(docs):
            tf = doc[term]
            out[i] += idf * tf / (tf + k1 * (1 - b + b * lengths[i] / avgdl))
    return out


# --------------------------------------------------------------------------- tokenize


def test_tokenize_lowercases_splits_drops_stop_words_and_stems() -> None:
    assert tokenize("The cells were RUNNING, aren't they?") == ["cell", "were", "run", "aren"]
    assert tokenize("Statins reduce cardiovascular risks.") == ["statin", "reduc", "cardiovascular", "risk"]


def test_tokenize_stop_words_and_punctuation_only_give_nothing() -> None:
    assert tokenize("the of and to in is it") == []
    assert tokenize("... !!! ??? --- ***") == []
    assert tokenize("") == []


def test_tokenize_drops_one_character_words_like_bm25s() -> None:
    assert tokenize("vitamin D and T cells, x = 5") == ["vitamin", "cell"]


def test_tokenize_normalises_unicode() -> None:
    assert tokenize("ﬁnding") == tokenize("finding") == ["find"]
    assert tokenize("ＣＥＬＬＳ") == ["cell"]  # full-width
    assert tokenize("İstanbul") == ["istanbul"]  # no stray combining dot splitting the word
    assert tokenize("Café naïve") == tokenize("Cafe\u0301 nai\u0308ve")  # composed == decomposed


def test_tokenize_matches_bm25s_own_pipeline() -> None:
    expected = bm25s.tokenize(
        CORPUS + QUERIES,
        stopwords="en",
        stemmer=Stemmer.Stemmer("english"),
        return_ids=False,
        show_progress=False,
    )
    assert tokenize_many(CORPUS + QUERIES) == expected


def test_stop_words_are_bm25s_english_list() -> None:
    assert set(bm25s.stopwords.STOPWORDS_EN) == STOPWORDS_EN


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_tokenize_hostile_input(text: str) -> None:
    tokens = tokenize(text)
    assert tokens == tokenize(text)
    assert all(token and token == token.lower() and re.fullmatch(r"\w+", token) for token in tokens)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_tokenize_never_raises_and_gives_nonempty_lowercase_words(text: str) -> None:
    tokens = tokenize(text)
    assert isinstance(tokens, list)
    for token in tokens:
        assert isinstance(token, str)
        assert token
        assert token == token.lower()
        assert re.fullmatch(r"\w+", token)
    assert tokenize(text) == tokens  # deterministic, cached or not


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["the", "a", "of", "and", "is", "not", "this", "there"]), max_size=20))
def test_tokenize_only_stop_words_is_empty(words: list[str]) -> None:
    assert tokenize(" ".join(words)) == []


def test_tokenize_is_thread_safe_from_a_cold_cache() -> None:
    tokenize_module._stem_cache.clear()
    texts = [f"{text} {i}th running organisations" for i, text in enumerate(CORPUS * 20)]
    with ThreadPoolExecutor(8) as pool:
        parallel = list(pool.map(tokenize, texts))
    tokenize_module._stem_cache.clear()
    assert parallel == [tokenize(text) for text in texts]


def test_stem_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenize_module, "_STEM_CACHE_MAX", 10)
    tokenize_module._stem_cache.clear()
    tokens = tokenize(" ".join(f"word{i}s" for i in range(50)))
    assert tokens == [f"word{i}" for i in range(50)]
    assert len(tokenize_module._stem_cache) <= 10


# --------------------------------------------------------------------------- BM25Index


def test_default_backend_is_bm25s() -> None:
    assert DEFAULT_BACKEND == "bm25s"
    index = BM25Index.build(CORPUS)
    assert (index.backend, index.method, index.k1, index.b) == ("bm25s", "lucene", 1.5, 0.75)


@pytest.mark.parametrize("backend", BOTH)
def test_doc_with_the_query_term_ranks_first(backend: str) -> None:
    index = _index(backend)
    positions, _ = index.scores("photosynthesis")
    assert set(positions.tolist()) == {0, 5}
    positions, _ = index.scores("chlorophyll and photosynthesis")
    assert positions.tolist() == [5, 0]
    positions, _ = index.scores("mitochondria")
    assert positions.tolist() == [1]
    positions, _ = index.top("insulin glucose", 3)
    assert positions[0] == 10


@pytest.mark.parametrize("backend", BOTH)
def test_scores_are_positive_sorted_and_typed(backend: str) -> None:
    index = _index(backend)
    for query in QUERIES:
        positions, scores = index.scores(query)
        assert positions.dtype == np.int64 and scores.dtype == np.float32
        assert len(positions) == len(scores) == len(set(positions.tolist()))
        assert (scores > 0).all()
        assert (np.diff(scores) <= 0).all()
        for i in range(len(scores) - 1):  # ties by position
            if scores[i] == scores[i + 1]:
                assert positions[i] < positions[i + 1]


@pytest.mark.parametrize("backend", BOTH)
def test_scores_cover_exactly_the_chunks_sharing_a_query_token(backend: str) -> None:
    index = _index(backend)
    docs = [set(doc) for doc in tokenize_many(CORPUS)]
    for query in QUERIES:
        terms = set(tokenize(query))
        expected = {i for i, doc in enumerate(docs) if doc & terms}
        assert set(index.scores(query)[0].tolist()) == expected


def test_backends_agree_on_ranking() -> None:
    a, b = _index("bm25s"), _index("rank_bm25")
    for query in QUERIES:
        assert a.scores(query)[0].tolist() == b.scores(query)[0].tolist(), query


def test_bm25s_backend_matches_the_lucene_formula() -> None:
    index = _index("bm25s")
    for query in QUERIES:
        expected = _lucene_scores(CORPUS, query)
        positions, scores = index.scores(query)
        dense = np.zeros(len(CORPUS))
        dense[positions] = scores
        np.testing.assert_allclose(dense, expected, rtol=1e-5, atol=1e-6)


def test_rank_bm25_is_robertson_bm25_times_k1_plus_1() -> None:
    """BM25Okapi = bm25s' "robertson" variant scaled by (k1 + 1) while every idf is positive."""
    okapi, robertson = _index("rank_bm25"), _index("bm25s", method="robertson")
    for query in QUERIES:
        p1, s1 = okapi.scores(query)
        p2, s2 = robertson.scores(query)
        assert p1.tolist() == p2.tolist()
        np.testing.assert_allclose(s1, s2 * 2.5, rtol=1e-5)


@pytest.mark.parametrize("ratio", [0, 10**9], ids=["dense", "sparse"])
def test_bm25s_backend_sums_like_bm25s_get_scores(monkeypatch: pytest.MonkeyPatch, ratio: int) -> None:
    monkeypatch.setattr(bm25_module._Bm25sScorer, "_SPARSE_RATIO", ratio)
    texts = CORPUS + [f"filler document number {i}" for i in range(60)]
    index = _index("bm25s", texts)
    retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    retriever.index(tokenize_many(texts), show_progress=False)
    for query in [*QUERIES, "cell cell viruses", "filler photosynthesis number"]:
        expected = retriever.get_scores(tokenize(query))
        positions, scores = index.scores(query)
        dense = np.zeros(len(texts), dtype=np.float32)
        dense[positions] = scores
        np.testing.assert_allclose(dense, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BOTH)
def test_repeated_query_words_count_twice(backend: str) -> None:
    index = _index(backend)
    p1, s1 = index.scores("cholesterol")
    p2, s2 = index.scores("cholesterol cholesterol")
    assert p1.tolist() == p2.tolist()
    np.testing.assert_allclose(s2, 2 * s1, rtol=1e-6)


@pytest.mark.parametrize("backend", BOTH)
@pytest.mark.parametrize("query", ["the of and", "", "   ", "!!!", "xylophone quasar", "a & b | !c"])
def test_queries_without_indexed_tokens_give_empty_arrays(backend: str, query: str) -> None:
    index = _index(backend)
    for positions, scores in (index.scores(query), index.top(query, 10)):
        assert positions.dtype == np.int64 and scores.dtype == np.float32
        assert len(positions) == len(scores) == 0


@pytest.mark.parametrize("backend", BOTH)
@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_queries(backend: str, query: str) -> None:
    index = _index(backend, [*CORPUS, "word " * 3, "a" * 10_000])
    positions, scores = index.scores(query)
    assert len(positions) == len(scores)
    assert (scores > 0).all()


@pytest.mark.parametrize("backend", BOTH)
def test_top_is_scores_truncated(backend: str) -> None:
    index = _index(backend)
    for query in QUERIES:
        positions, scores = index.scores(query)
        for k in range(len(CORPUS) + 2):
            top_p, top_s = index.top(query, k)
            assert top_p.tolist() == positions[:k].tolist()
            assert top_s.tolist() == scores[:k].tolist()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=st.lists(
        st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "omega", "the"]), max_size=6),
        min_size=1,
        max_size=25,
    ),
    query=st.lists(st.sampled_from(["alpha", "beta", "gamma", "zeta", "the"]), max_size=4),
    k=st.integers(0, 30),
    backend=st.sampled_from(BOTH),
)
def test_top_and_scores_agree_on_random_corpora(
    docs: list[list[str]], query: list[str], k: int, backend: str
) -> None:
    """Ties are everywhere in these corpora: top() must still cut exactly where scores() does."""
    index = _index(backend, [" ".join(doc) for doc in docs])
    positions, scores = index.scores(" ".join(query))
    assert (scores > 0).all()
    assert np.array_equal(np.lexsort((positions, -scores)), np.arange(len(scores)))
    top_p, top_s = index.top(" ".join(query), k)
    assert top_p.tolist() == positions[:k].tolist()
    assert top_s.tolist() == scores[:k].tolist()


@pytest.mark.parametrize("backend", BOTH)
def test_debug_attributes(backend: str) -> None:
    index = _index(backend, ["cats sat", "the cat", "dogs"])
    assert len(index) == 3
    assert index.vocab_size == 3  # cat, sat, dog
    assert index.avg_doc_len == pytest.approx(4 / 3)
    assert backend in repr(index)


@pytest.mark.parametrize("backend", BOTH)
@pytest.mark.parametrize("texts", [[], [""], ["the of and", "!!!"], ["", "cat", "dogs"]])
def test_degenerate_corpora(backend: str, texts: list[str]) -> None:
    index = _index(backend, texts)
    assert len(index) == len(texts)
    positions, _ = index.scores("cat")
    assert positions.tolist() == ([1] if "cat" in texts else [])
    assert len(index.top("the", 5)[0]) == 0


def test_single_chunk_corpus() -> None:
    # bm25s: one chunk matching the query is found. rank_bm25's idf is negative at df = N and
    # its 0.25-x-mean floor is negative too, so its reference backend finds nothing.
    assert BM25Index.build(["lonely cat"]).scores("cat")[0].tolist() == [0]
    assert BM25Index.build(["lonely cat"], backend="rank_bm25").scores("cat")[0].tolist() == []


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="backend"):
        BM25Index.build(CORPUS, backend="elastic")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="method"):
        BM25Index.build(CORPUS, method="bm25l")
    with pytest.raises(TypeError, match="method"):
        BM25Index.build(CORPUS, backend="rank_bm25", method="lucene")
    with pytest.raises(ValueError, match="k1"):
        BM25Index.build(CORPUS, k1=-1)
    with pytest.raises(ValueError, match="k1"):
        BM25Index.build(CORPUS, k1=math.nan)
    with pytest.raises(ValueError, match="b must"):
        BM25Index.build(CORPUS, b=1.5)
    with pytest.raises(ValueError, match="k must"):
        BM25Index.build(CORPUS).top("cell", -1)
    assert set(BACKENDS) == set(BOTH)


@pytest.mark.parametrize("method", BACKENDS["bm25s"])
def test_every_bm25s_method_ranks_the_term_holder_first(method: str) -> None:
    index = _index("bm25s", method=method)
    assert index.method == method
    assert index.top("mitochondria", 1)[0].tolist() == [1]


def test_importing_the_lexical_modules_stays_light() -> None:
    code = (
        "import sys, agentrag; before = set(sys.modules);"
        "import agentrag.retrieval, agentrag.retrieval.tokenize, agentrag.retrieval.bm25;"
        "heavy = {'numpy', 'bm25s', 'rank_bm25', 'Stemmer', 'scipy'};"
        "print(sorted(heavy & (set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


def test_building_an_index_logs_nothing_under_an_application_at_warning() -> None:
    """bm25s sets its own logger to DEBUG at import; an application logging at WARNING must not see
    its "Building index from IDs" (it did, in the demo's output)."""
    code = (
        "import logging, sys;"
        "logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format='%(name)s %(message)s');"
        "from agentrag.retrieval.bm25 import BM25Index;"
        "index = BM25Index.build(['a cursor pages the notes', 'rate limits per plan']);"
        "print('built', len(index))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "built 2"


def _bm25s_matrix(ids: list[list[int]], vocab: dict[str, int], method: str, k1: float, b: float) -> tuple:
    model = bm25s.BM25(k1=k1, b=b, method=method)
    model.index((ids, vocab), create_empty_token=False, show_progress=False)
    return model.scores["data"], model.scores["indices"], model.scores["indptr"]


@settings(max_examples=60, deadline=None)
@given(
    docs=st.lists(st.lists(st.integers(0, 40), max_size=30), min_size=1, max_size=40),
    method=st.sampled_from(BACKENDS["bm25s"]),
    k1=st.sampled_from([1.5, 1.2, 0.9, 2.0]),
    b=st.sampled_from([0.75, 0.0, 1.0, 0.3]),
)
def test_score_matrix_equals_bm25s_bit_for_bit(
    docs: list[list[int]], method: str, k1: float, b: float
) -> None:
    """Issue #39: the index is built without importing bm25s (and scipy): the same float32 scores,
    rows and column pointers as bm25s' own build, for every method and parameters."""
    used = sorted({t for doc in docs for t in doc})
    if not used:
        return
    renumber = {t: i for i, t in enumerate(used)}
    ids = [[renumber[t] for t in doc] for doc in docs]
    vocab = {f"t{t}": i for t, i in renumber.items()}
    ours = bm25_module.score_matrix(ids, len(vocab), k1=k1, b=b, method=method)
    theirs = _bm25s_matrix(ids, vocab, method, k1, b)
    for a, e in zip(ours, theirs, strict=True):
        assert a.tolist() == e.tolist()
    assert ours[0].dtype == np.float32


def test_score_matrix_equals_bm25s_on_scifact_sized_text() -> None:
    texts = CORPUS * 40 + [f"filler document number {i} about cells and viruses" for i in range(300)]
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in tokenize(text)] for text in texts]
    ours = bm25_module.score_matrix(ids, len(vocab), k1=1.5, b=0.75, method="lucene")
    for a, e in zip(ours, _bm25s_matrix(ids, vocab, "lucene", 1.5, 0.75), strict=True):
        assert np.array_equal(a, e)


def test_building_an_index_imports_neither_bm25s_nor_scipy() -> None:
    code = (
        "import sys; from agentrag.retrieval.bm25 import BM25Index; "
        "BM25Index.build(['cells divide', 'viruses infect cells']).top('cells', 2); "
        "print('bm25s' in sys.modules, 'scipy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
