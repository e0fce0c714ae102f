"""Loading BEIR-format datasets: the bundled mini sample, SciFact when present, and malformed folders."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from agentrag.errors import InvalidInputError
from agentrag.eval import BeirDataset, BeirDoc, evaluate_rankings, load_beir
from tests.conftest import SCIFACT

ROOT = Path(__file__).resolve().parents[1]
MINI = ROOT / "samples" / "beir_mini"

needs_scifact = pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").is_file(), reason="SciFact not present")


@pytest.fixture
def mini_copy(tmp_path: Path) -> Path:
    target = tmp_path / "mini"
    shutil.copytree(MINI, target)
    return target


# -- the bundled sample ---------------------------------------------------------------------------------


def test_mini_sample_shape() -> None:
    ds = load_beir(MINI)
    assert isinstance(ds, BeirDataset)
    assert ds.name == "beir_mini" and ds.split == "test"
    assert len(ds.corpus) == 40
    # queries.jsonl has 12 queries; q11 and q12 have no test qrels and are left out
    assert len(ds.queries) == 10
    assert list(ds.queries) == [f"q{i}" for i in range(1, 11)]
    assert "q11" not in ds.queries and "q11" not in ds.qrels
    assert set(ds.qrels) == set(ds.queries)
    assert sum(len(docs) for docs in ds.qrels.values()) == 18
    # graded relevance and a judged non-relevant document (grade 0) are kept as given
    assert ds.qrels["q1"] == {"mini001": 2, "mini004": 1}
    assert ds.qrels["q10"] == {"mini030": 2, "mini026": 0}
    # every judged document exists in the corpus
    assert all(doc_id in ds.corpus for docs in ds.qrels.values() for doc_id in docs)
    assert repr(ds) == "BeirDataset(name='beir_mini', split='test', docs=40, queries=10, qrels=18)"


def test_index_text_with_and_without_title() -> None:
    ds = load_beir(MINI)
    titled = ds.corpus["mini001"]
    assert isinstance(titled, BeirDoc)
    assert titled.index_text == f"{titled.title}\n{titled.text}"
    assert titled.index_text.startswith(
        "Lower seawater pH slows skeleton growth in branching corals\nBranching"
    )
    untitled = ds.corpus["mini024"]
    assert untitled.title == ""
    assert untitled.index_text == untitled.text
    assert BeirDoc("x", "   ", "body").index_text == "body"


def test_mini_sample_is_a_sensible_retrieval_task() -> None:
    """An oracle scores 1.0 and a crude word-overlap ranker scores well but not perfectly."""
    ds = load_beir(MINI)
    oracle = {qid: sorted(rels, key=lambda doc: -rels[doc]) for qid, rels in ds.qrels.items()}
    assert evaluate_rankings("oracle", {}, oracle, ds.qrels, ds.queries).summary()[
        "ndcg@10"
    ] == pytest.approx(1.0)

    def words(text: str) -> set[str]:
        return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3}

    doc_words = {doc_id: words(doc.index_text) for doc_id, doc in ds.corpus.items()}

    def overlap_ranking(query: str) -> list[str]:
        q = words(query)
        return sorted(ds.corpus, key=lambda doc_id: (-len(q & doc_words[doc_id]), doc_id))

    rankings = {qid: overlap_ranking(text) for qid, text in ds.queries.items()}
    summary = evaluate_rankings("overlap", {}, rankings, ds.qrels, ds.queries).summary()
    assert 0.5 < summary["ndcg@10"] < 1.0


# -- sampling -------------------------------------------------------------------------------------------


def test_sample_is_deterministic_and_keeps_the_corpus() -> None:
    full = load_beir(MINI)
    one = load_beir(MINI, sample=4, seed=7)
    two = load_beir(MINI, sample=4, seed=7)
    assert list(one.queries) == list(two.queries)
    assert len(one.queries) == 4 and set(one.qrels) == set(one.queries)
    assert set(one.queries) <= set(full.queries)
    assert all(one.qrels[qid] == full.qrels[qid] for qid in one.qrels)
    assert len(one.corpus) == 40
    # the seed matters: not every seed picks the same 4 queries
    picks = {tuple(load_beir(MINI, sample=4, seed=seed).queries) for seed in range(10)}
    assert len(picks) > 1


def test_sample_larger_than_split_keeps_all_and_bad_sample_rejected() -> None:
    assert len(load_beir(MINI, sample=1000).queries) == 10
    with pytest.raises(InvalidInputError):
        load_beir(MINI, sample=0)
    with pytest.raises(TypeError):
        load_beir(MINI, sample=2.5)  # type: ignore[arg-type]


# -- SciFact --------------------------------------------------------------------------------------------


@needs_scifact
def test_scifact_test_split() -> None:
    ds = load_beir(SCIFACT)
    assert ds.name == "scifact"
    assert len(ds.queries) == 300
    assert len(ds.corpus) == 5183
    assert sum(len(docs) for docs in ds.qrels.values()) == 339
    assert all(text.strip() for text in ds.queries.values())
    assert ds.queries["1"] == "0-dimensional biomaterials show inductive properties."
    assert ds.qrels["1"] == {"31715818": 1}


@needs_scifact
def test_scifact_sample() -> None:
    one = load_beir(SCIFACT, sample=25, seed=3)
    assert len(one.queries) == 25 and len(one.corpus) == 5183
    assert list(one.queries) == list(load_beir(SCIFACT, sample=25, seed=3).queries)
    assert list(one.queries) != list(load_beir(SCIFACT, sample=25, seed=4).queries)


# -- malformed folders ----------------------------------------------------------------------------------


@pytest.mark.parametrize("missing", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_missing_file_is_named(mini_copy: Path, missing: str) -> None:
    (mini_copy / missing).unlink()
    with pytest.raises(InvalidInputError, match=re.escape(str(mini_copy / missing))):
        load_beir(mini_copy)


def test_missing_split_and_folder(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"dev\.tsv"):
        load_beir(MINI, split="dev")
    with pytest.raises(InvalidInputError, match="nowhere"):
        load_beir(tmp_path / "nowhere")


def test_invalid_json_line_is_located(mini_copy: Path) -> None:
    with (mini_copy / "corpus.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    with pytest.raises(InvalidInputError, match=r"corpus\.jsonl:41"):
        load_beir(mini_copy)


def test_bad_qrels_score(mini_copy: Path) -> None:
    with (mini_copy / "qrels" / "test.tsv").open("a", encoding="utf-8") as handle:
        handle.write("q1\tmini002\thigh\n")
    with pytest.raises(InvalidInputError, match=r"test\.tsv:20.*'high'"):
        load_beir(mini_copy)


def test_bad_qrels_columns(mini_copy: Path) -> None:
    with (mini_copy / "qrels" / "test.tsv").open("a", encoding="utf-8") as handle:
        handle.write("q1 mini002 1\n")
    with pytest.raises(InvalidInputError, match="3 tab-separated columns"):
        load_beir(mini_copy)


def test_qrels_without_header_are_accepted(mini_copy: Path) -> None:
    path = mini_copy / "qrels" / "test.tsv"
    path.write_text("".join(path.read_text(encoding="utf-8").splitlines(keepends=True)[1:]), encoding="utf-8")
    assert sum(len(docs) for docs in load_beir(mini_copy).qrels.values()) == 18


def test_qrels_query_without_text(mini_copy: Path) -> None:
    with (mini_copy / "qrels" / "test.tsv").open("a", encoding="utf-8") as handle:
        handle.write("q99\tmini002\t1\n")
    with pytest.raises(InvalidInputError, match="'q99'"):
        load_beir(mini_copy)


def test_duplicate_document_id(mini_copy: Path) -> None:
    with (mini_copy / "corpus.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"_id": "mini001", "title": "again", "text": "copy"}\n')
    with pytest.raises(InvalidInputError, match="duplicate document id 'mini001'"):
        load_beir(mini_copy)
