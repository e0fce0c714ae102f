"""``agentrag eval answers FILE``: collections required or inferred, never assumed; reports, JSON,
calibration and the support check. Real PostgreSQL (the session store, FakeEmbedder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentrag as ar
from agentrag import cli
from agentrag.store.store import Store
from tests.conftest import REPO

SUPPORT = REPO / "samples" / "support"


@pytest.fixture
def run(store: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    monkeypatch.setattr(cli.common, "open_store", lambda args: store)

    def invoke(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return invoke


@pytest.fixture(scope="module")
def support(store: Store) -> str:
    name = "answers_cli_support"
    store.create_collection(name, exist_ok=True)
    for file in ("recover-deleted-note.md", "billing-changing-plans-and-refunds.md"):
        store.ingest(SUPPORT / file, collection=name)
    return name


def questions(tmp_path: Path, collection: str, *, meta: list[str] | None = None) -> Path:
    rows: list[dict[str, Any]] = [] if meta is None else [{"kind": "meta", "collections": meta}]
    rows += [
        {
            "id": "a1",
            "kind": "answerable",
            "question": "How long do deleted notes stay in the trash?",
            "expected": ["30 days"],
            "sources": [f"{collection}/recover-deleted-note.md"],
            "fact": "prose",
        },
        {
            "id": "a2",
            "kind": "answerable",
            "question": "How long do refunds take to reach my card?",
            "expected": ["5 to 10 business days"],
            "sources": [f"{collection}/billing-changing-plans-and-refunds.md"],
        },
        {"id": "u1", "kind": "unanswerable", "question": "Can I pay with PayPal?"},
        {"id": "o1", "kind": "out_of_domain", "question": "What is the capital of France?"},
        {"id": "t1", "kind": "small_talk", "question": "hello!"},
    ]
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_collections_inferred_from_the_sources_and_json_output(
    run: Any, support: str, tmp_path: Path
) -> None:
    code, out, _ = run("eval", "answers", str(questions(tmp_path, support)), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["collections"] == [support]
    assert report["metrics"]["counts"] == {
        "answerable": 2,
        "unanswerable": 1,
        "out_of_domain": 1,
        "small_talk": 1,
        "followup": 0,
    }
    assert [o["id"] for o in report["outcomes"]] == ["a1", "a2", "u1", "o1", "t1"]
    for o in report["outcomes"]:
        assert set(o["cited"]) <= {
            f"{support}/recover-deleted-note.md",
            f"{support}/billing-changing-plans-and-refunds.md",
        }
        assert o["error"] is None and isinstance(o["abstained"], bool)
    answered = report["outcomes"][0]
    assert answered["fact_retrieved"] is True  # the chunk that says it was retrieved
    assert answered["fact_hit"] == (
        "30 days" in answered["answer"].replace("**", "") and not answered["abstained"]
    )
    metrics = report["metrics"]
    assert 0.0 <= metrics["false_grounded_out_of_domain"] <= 1.0 and metrics["followup_fact_hit"] is None


def test_a_missing_collection_is_an_error_that_says_what_to_do(
    run: Any, support: str, tmp_path: Path
) -> None:
    path = questions(tmp_path, support, meta=["product_docs_not_here"])
    code, out, err = run("eval", "answers", str(path))
    assert code == 2 and out == ""
    assert (
        "product_docs_not_here" in err and "meta line" in err and "--collections" in err and "ingest" in err
    )
    code, _, err = run("eval", "answers", str(path), "--collections", f"{support},nope_xyz")
    assert code == 2 and "collection(s) nope_xyz (from --collections)" in err


def test_a_set_that_names_no_collection_needs_collections(run: Any, tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "o", "kind": "out_of_domain", "question": "What is 2 + 2?"}) + "\n")
    code, _, err = run("eval", "answers", str(path))
    assert code == 2 and "names no collections" in err and "--collections" in err


def test_a_bad_file_names_its_line(run: Any, tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "o", "kind": "out_of_domain", "question": "hi"}\n{"id": "o", "kind": "x"}\n')
    code, _, err = run("eval", "answers", str(path), "--collections", "whatever")
    assert code == 2 and f"{path}:2" in err
    code, _, err = run("eval", "answers", str(tmp_path / "missing.jsonl"))
    assert code == 2 and "no question set" in err


def test_text_report_with_misses_and_the_support_check(run: Any, support: str, tmp_path: Path) -> None:
    path = questions(tmp_path, support, meta=[support])
    code, out, _ = run("eval", "answers", str(path), "--misses", "--support", "6")
    assert code == 0
    assert f"5 questions (2 answerable, 1 unanswerable, 1 out_of_domain, 1 small_talk) over {support}" in out
    for label in (
        "right source cited",
        "false-grounded, out-of-domain",
        "abstention recall",
        "answer step p50",
    ):
        assert label in out
    assert "support check, 6 scripted replies: unsupported flagged" in out and "uncited" in out


def test_calibrate(run: Any, support: str, tmp_path: Path) -> None:
    path = questions(tmp_path, support)
    try:
        ar.answer(abstain=False)
    except TypeError:  # this answer() cannot answer without abstaining: the command says so
        code, _, err = run("eval", "answers", str(path), "--calibrate")
        assert code == 2 and "--calibrate needs" in err
        return
    code, out, _ = run("eval", "answers", str(path), "--calibrate", "--json")
    assert code == 0
    calibration = json.loads(out)["calibration"]
    assert 0.0 <= calibration["abstain_below"] <= 1.0
    assert calibration["questions"] == {"answerable": 2, "unanswerable": 2}
    code, out, _ = run("eval", "answers", str(path), "--calibrate")
    assert code == 0 and "(answered without abstaining, to calibrate" in out
    assert f"abstain below confidence {calibration['abstain_below']:.2f}" in out
    assert f"Calibration(abstain_below={calibration['abstain_below']:.2f}" in out  # how to use it
