"""Answers on corpora they were never tuned on (issue #36): leave-one-corpus-out over six corpora.

    .venv/bin/python -m benchmarks.answers_loco [--answerable 120] [--json FILE] [--only NAME ...]

The corpora (each its own collection(s) in one database, ``agentrag_loco``):

* ``samples`` and ``library``: ``samples/answers/samples.jsonl`` over ``samples/`` and
  ``library.jsonl`` over ``samples/library/`` (the sets of benchmarks/answers.py; follow-ups count as
  answerable, in-domain unanswerable questions as near-misses, out-of-domain ones as absent);
* ``squad2``: the SQuAD 2.0 subset (``../shared/data/squad2-subset``): open retrieval over the 83
  paragraphs of its dev file; answerable questions and the adversarially unanswerable ones as given
  (near-misses), and questions of the train file's article that is not in the collection (absent);
* ``xquad_en``: the English half of XQuAD-dev: a quarter of its 24 articles (seeded) left out of the
  collection, their questions asked as absent;
* ``handbook`` and ``runbook``: two corpora written for this benchmark (``benchmarks/corpora/``),
  short HR policies and a technical runbook, each with answerable questions and near-misses (the same
  frame as a covered question, another focus: "sick days" beside "vacation days").

Each question runs the chat pipeline with default settings and no LLM (``gate -> condense -> search
-> rerank``), then ``answer()`` twice on the same context: as configured (the library's behaviour)
and with ``abstain=False`` (what it would have quoted, for the fits). Per corpus: answerable fact
hit and refused, near-misses and absent questions answered, and the expected calibration error of
``answer_confidence`` (an answer is correct when it states the expected fact; any answer to an
unanswerable question is wrong) with its reliability table.

Leave-one-corpus-out: for each corpus, a logistic curve over the library's combined evidence score
and an abstention threshold are fitted on the *other* corpora (each corpus weighing the same), then
applied to the held-out one. The library's defaults are what a new user gets; the held-out rows
say whether fitting on other writing transfers.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentrag.abstain import DEFAULT_CALIBRATION
from benchmarks._paths import CHECKOUT

SHARED = CHECKOUT.parent / "shared" / "data"
OWN = CHECKOUT / "benchmarks" / "corpora"
BINS = 10


@dataclass(frozen=True, slots=True)
class Corpus:
    """A folder with ``collections.json`` (as samples/ has) and its questions (eval.answers items;
    ``why`` on an unanswerable one: ``near_miss`` or ``absent``)."""

    name: str
    folder: Path
    items: tuple[dict[str, Any], ...]


@dataclass(slots=True)
class Row:
    """One question's outcome under the library's settings and without abstaining."""

    corpus: str
    id: str
    category: str  # answerable | near_miss | absent
    question: str
    confidence: float
    abstained: bool  # as configured
    hit: bool  # as configured: answered with the expected fact
    open_hit: bool  # abstain=False: the quoted answer states the expected fact
    no_selection: bool  # abstained because nothing cleared the selection threshold
    answer: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# ---- corpora --------------------------------------------------------------------------------------
def _category(item: dict[str, Any]) -> str | None:
    kind = item["kind"]
    if kind in ("answerable", "followup"):
        return "answerable"
    if kind == "unanswerable":
        return str(item.get("why", "near_miss"))
    if kind == "out_of_domain":
        return "absent"
    return None


def _jsonl(path: Path) -> tuple[dict[str, Any], ...]:
    from agentrag.eval.answers import load_answer_set

    return load_answer_set(path).items


def samples_corpora() -> list[Corpus]:
    return [
        Corpus("samples", CHECKOUT / "samples", _jsonl(CHECKOUT / "samples/answers/samples.jsonl")),
        Corpus("library", CHECKOUT / "samples/library", _jsonl(CHECKOUT / "samples/answers/library.jsonl")),
    ]


def own_corpora() -> list[Corpus]:
    return [
        Corpus(name, OWN / name, _jsonl(OWN / name / "questions.jsonl")) for name in ("handbook", "runbook")
    ]


def _write_collection(root: Path, name: str, description: str, docs: dict[str, str]) -> Path:
    folder = root / name
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / "collections.json").write_text(json.dumps([{"name": name, "description": description}]))
    for file, text in docs.items():
        path = folder / name / file
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
    return folder


def _squad_questions(article: dict[str, Any]) -> list[tuple[str, list[str], bool]]:
    return [
        (qa["question"].strip(), [a["text"] for a in qa.get("answers", [])], bool(qa.get("is_impossible")))
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]


def _paragraph_docs(articles: Sequence[dict[str, Any]]) -> dict[str, str]:
    docs = {}
    for article in articles:
        title = article["title"].replace("_", " ")
        for i, paragraph in enumerate(article["paragraphs"]):
            docs[f"{article['title']}-{i:02d}.md"] = f"# {title}\n\n{paragraph['context'].strip()}\n"
    return docs


def squad_corpus(root: Path, answerable: int, seed: int) -> Corpus:
    dev = json.loads((SHARED / "squad2-subset/dev-v2.0-subset.json").read_text())["data"]
    train = json.loads((SHARED / "squad2-subset/train-v2.0-subset.json").read_text())["data"]
    titles = {a["title"] for a in dev}
    folder = _write_collection(
        root, "squad2", "Wikipedia paragraphs about the Normans and the Rhine.", _paragraph_docs(dev)
    )
    rng = random.Random(seed)
    asked = [q for a in dev for q in _squad_questions(a)]
    good = rng.sample([q for q in asked if not q[2]], answerable)
    adversarial = rng.sample([q for q in asked if q[2]], answerable)
    absent = [q for a in train if a["title"] not in titles for q in _squad_questions(a) if not q[2]]
    absent = rng.sample(absent, answerable // 2)
    return Corpus("squad2", folder, _items("squad2", good, adversarial, absent))


def xquad_corpus(root: Path, answerable: int, seed: int) -> Corpus:
    """XQuAD-dev English (only the 24 articles given): a quarter of them left out of the collection."""
    data = json.loads((SHARED / "xquad-dev/xquad-dev.en.json").read_text())["data"]
    rng = random.Random(seed)
    out = set(rng.sample(sorted(a["title"] for a in data), len(data) // 4))
    kept = [a for a in data if a["title"] not in out]
    folder = _write_collection(
        root, "xquad_en", "Wikipedia paragraphs on assorted subjects.", _paragraph_docs(kept)
    )
    good = [q for a in kept for q in _squad_questions(a)]
    absent = [q for a in data if a["title"] in out for q in _squad_questions(a)]
    good = rng.sample(good, min(answerable, len(good)))
    absent = rng.sample(absent, min(answerable // 2, len(absent)))
    return Corpus("xquad_en", folder, _items("xquad_en", good, [], absent))


def _items(
    name: str,
    good: Sequence[tuple[str, list[str], bool]],
    near: Sequence[tuple[str, list[str], bool]],
    absent: Sequence[tuple[str, list[str], bool]],
) -> tuple[dict[str, Any], ...]:
    items: list[dict[str, Any]] = []
    for i, (question, expected, _) in enumerate(good):
        items.append(
            {
                "id": f"{name}-a{i}",
                "kind": "answerable",
                "question": question,
                "expected": expected,
                "sources": ["-"],
            }
        )
    for why, group in (("near_miss", near), ("absent", absent)):
        for i, (question, _, _) in enumerate(group):
            items.append({"id": f"{name}-{why}{i}", "kind": "unanswerable", "why": why, "question": question})
    return tuple(items)


# ---- running --------------------------------------------------------------------------------------
class _Recorder:
    """The signals behind the last answer (the answer step's ``gather``, wrapped for this run only):
    what the leave-one-corpus-out fits read besides the confidence."""

    def __init__(self) -> None:
        self.last: dict[str, Any] = {}

    def __enter__(self) -> _Recorder:
        import importlib

        step = importlib.import_module("agentrag.steps.answer")  # the module, not the Step it exports
        self._step, self._gather = step, step.gather

        def gather(*args: Any, **kwargs: Any) -> Any:
            evidence = self._gather(*args, **kwargs)
            self.last = {k: v for k, v in asdict(evidence.signals).items() if v is not None}
            return evidence

        step.gather = gather
        return self

    def __exit__(self, *exc: object) -> None:
        self._step.gather = self._gather


def run_corpus(store: Any, corpus: Corpus, on_row: Callable[[Row], None] | None = None) -> list[Row]:
    with _Recorder() as recorder:
        return _run_corpus(store, corpus, recorder, on_row)


def _run_corpus(
    store: Any, corpus: Corpus, recorder: _Recorder, on_row: Callable[[Row], None] | None
) -> list[Row]:
    import agentrag as ar
    from agentrag.eval.answers import abstained, fact_hit
    from benchmarks._answers_worker import ingest_corpus

    collections = ingest_corpus(store, corpus.folder)
    configured, opened = ar.answer(), ar.answer(abstain=False)
    rows = []
    for item in corpus.items:
        category = _category(item)
        if category is None:
            continue
        ctx = ar.new(
            item["question"],
            store=store,
            collections=collections,
            history=item.get("history") or None,
            limit=5,
        )
        ctx = ctx | ar.gate() | ar.condense() | ar.search() | ar.rerank()
        recorder.last = {}
        as_is = ctx | configured
        signals = recorder.last
        open_ = ctx | opened
        expected = item.get("expected", [])
        conf = as_is.answer_confidence if as_is.answer_confidence is not None else 0.0
        refused = abstained(as_is)
        row = Row(
            corpus=corpus.name,
            id=item["id"],
            category=category,
            question=item["question"],
            confidence=float(conf),
            abstained=refused,
            hit=bool(expected) and not refused and fact_hit(as_is.answer_text or "", expected),
            open_hit=bool(expected) and not abstained(open_) and fact_hit(open_.answer_text or "", expected),
            no_selection=refused and conf >= DEFAULT_CALIBRATION.abstain_below,
            answer=(open_.answer_text or "")[:300],
            extra={"searched": ctx.question, "signals": signals},
        )
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


# ---- metrics --------------------------------------------------------------------------------------
def _rate(flags: Sequence[bool]) -> float | None:
    return None if not flags else round(sum(flags) / len(flags), 3)


def correct(row: Row) -> bool:
    """What a confidence promises: the answer given states the fact (never, for an unanswerable one)."""
    return row.category == "answerable" and row.open_hit


def reliability(
    confidences: Sequence[float], outcomes: Sequence[bool], bins: int = BINS
) -> list[dict[str, Any]]:
    table = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [
            (c, y)
            for c, y in zip(confidences, outcomes, strict=True)
            if lo <= c < hi or (b == bins - 1 and c == 1.0)
        ]
        if inside:
            table.append(
                {
                    "bin": f"{lo:.1f}-{hi:.1f}",
                    "n": len(inside),
                    "confidence": round(sum(c for c, _ in inside) / len(inside), 3),
                    "accuracy": round(sum(y for _, y in inside) / len(inside), 3),
                }
            )
    return table


def ece(confidences: Sequence[float], outcomes: Sequence[bool]) -> float:
    table = reliability(confidences, outcomes)
    total = sum(r["n"] for r in table) or 1
    return round(sum(r["n"] * abs(r["confidence"] - r["accuracy"]) for r in table) / total, 3)


def metrics(rows: Sequence[Row], confidences: Sequence[float], answered: Sequence[bool]) -> dict[str, Any]:
    """The per-corpus figures for one decision: ``answered[i]`` whether row i was answered."""
    by = {
        c: [i for i, r in enumerate(rows) if r.category == c] for c in ("answerable", "near_miss", "absent")
    }
    good = by["answerable"]
    return {
        "n": {c: len(v) for c, v in by.items()},
        "fact_hit": _rate([answered[i] and rows[i].open_hit for i in good]),
        "refused": _rate([not answered[i] for i in good]),
        "near_miss_answered": _rate([answered[i] for i in by["near_miss"]]),
        "absent_answered": _rate([answered[i] for i in by["absent"]]),
        "ece": ece(confidences, [correct(r) for r in rows]),
        "reliability": reliability(confidences, [correct(r) for r in rows]),
    }


def as_configured(rows: Sequence[Row]) -> dict[str, Any]:
    out = metrics(rows, [r.confidence for r in rows], [not r.abstained for r in rows])
    out["fact_hit"] = _rate([r.hit for r in rows if r.category == "answerable"])
    return out


# ---- leave one corpus out -------------------------------------------------------------------------
def _combined(conf: float) -> float:
    """The library's combined evidence score behind a default-calibrated confidence."""
    cal = DEFAULT_CALIBRATION
    c = min(max(conf, 1e-4), 1 - 1e-4)
    return cal.center + math.log(c / (1 - c)) / cal.scale


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def fit(rows: Sequence[Row], steps: int = 600) -> tuple[float, float, float]:
    """A logistic (a, b) of correctness on the combined score, each corpus weighing the same, and
    the threshold on it maximising the corpora's mean balanced accuracy."""
    corpora = sorted({r.corpus for r in rows})
    weight = {c: 1.0 / sum(1 for r in rows if r.corpus == c) for c in corpora}
    xs = [_combined(r.confidence) for r in rows]
    ys = [1.0 if correct(r) else 0.0 for r in rows]
    ws = [weight[r.corpus] for r in rows]
    total = sum(ws)
    a, b = 18.0, -18.0 * 0.47
    for _ in range(steps):
        ga = gb = 0.0
        for x, y, w in zip(xs, ys, ws, strict=True):
            g = (_sigmoid(a * x + b) - y) * w
            ga, gb = ga + g * x, gb + g
        a -= 40.0 * ga / total
        b -= 4.0 * gb / total
    a = max(a, 1e-3)

    def balanced(t: float) -> float:
        scores = []
        for c in corpora:
            mine = [(r, _sigmoid(a * x + b)) for r, x in zip(rows, xs, strict=True) if r.corpus == c]
            good = [
                r.open_hit and p >= t and not r.no_selection for r, p in mine if r.category == "answerable"
            ]
            bad = [p < t or r.no_selection for r, p in mine if r.category != "answerable"]
            parts = [sum(v) / len(v) for v in (good, bad) if v]
            scores.append(sum(parts) / len(parts))
        return sum(scores) / len(scores)

    grid = [i / 100 for i in range(5, 96)]
    values = [balanced(t) for t in grid]
    best = max(values)
    ties = [t for t, v in zip(grid, values, strict=True) if v >= best - 1e-9]
    return a, b, ties[len(ties) // 2]


def held_out(rows: Sequence[Row], corpus: str) -> dict[str, Any]:
    a, b, t = fit([r for r in rows if r.corpus != corpus])
    mine = [r for r in rows if r.corpus == corpus]
    conf = [_sigmoid(a * _combined(r.confidence) + b) for r in mine]
    out = metrics(mine, conf, [p >= t and not r.no_selection for r, p in zip(mine, conf, strict=True)])
    out["fitted"] = {"a": round(a, 2), "b": round(b, 2), "threshold": t}
    return out


def isotonic(points: Sequence[tuple[float, float, float]]) -> list[tuple[float, float]]:
    """Pool-adjacent-violators over ``(x, y, weight)``: the non-decreasing step function of y on x
    (weighted least squares), as ``(x, value)`` knots in x order (one per pooled block's upper end)."""
    blocks: list[list[float]] = []  # [x_high, weighted sum of y, weight]
    for x, y, w in sorted(points):
        if blocks and blocks[-1][0] == x:  # one score, one value: ties pool first
            blocks[-1][1] += y * w
            blocks[-1][2] += w
        else:
            blocks.append([x, y * w, w])
        while len(blocks) > 1 and blocks[-2][1] / blocks[-2][2] >= blocks[-1][1] / blocks[-1][2]:
            top = blocks.pop()
            blocks[-1] = [top[0], blocks[-1][1] + top[1], blocks[-1][2] + top[2]]
    return [(x, total / weight) for x, total, weight in blocks]


def step_value(knots: Sequence[tuple[float, float]], x: float) -> float:
    """The isotonic map's value at ``x``: the first knot at or above it (the last one beyond)."""
    for high, value in knots:
        if x <= high:
            return value
    return knots[-1][1] if knots else 0.5


def held_out_map(rows: Sequence[Row], corpus: str) -> dict[str, Any]:
    """The defaults' answers with their confidence replaced by an isotonic map of correctness on
    the combined score, fitted on the other corpora (each weighing the same): whether a calibration
    table that changes no answer transfers to the held-out corpus."""
    others = [r for r in rows if r.corpus != corpus]
    counts = {c: sum(1 for r in others if r.corpus == c) for c in {r.corpus for r in others}}
    knots = isotonic([(_combined(r.confidence), float(correct(r)), 1.0 / counts[r.corpus]) for r in others])
    mine = [r for r in rows if r.corpus == corpus]
    out = metrics(
        mine, [step_value(knots, _combined(r.confidence)) for r in mine], [not r.abstained for r in mine]
    )
    out["fact_hit"] = _rate([r.hit for r in mine if r.category == "answerable"])
    return out


# ---- report ---------------------------------------------------------------------------------------
COLUMNS = (
    ("fact_hit", "answerable fact hit"),
    ("refused", "answerable refused"),
    ("near_miss_answered", "near-miss answered"),
    ("absent_answered", "absent answered"),
    ("ece", "ECE"),
)


SETTINGS = {
    "default": "defaults",
    "held_out": "fitted on the others",
    "held_out_map": "defaults' answers, confidence mapped from the others",
}


def _cell(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def report(results: dict[str, dict[str, Any]], label: str) -> None:
    print(f"\n{label}")
    print(
        "| corpus | questions (ans / near / absent) | setting | " + " | ".join(c for _, c in COLUMNS) + " |"
    )
    print("|---|---|---|" + "---|" * len(COLUMNS))
    for name, result in results.items():
        n = result["default"]["n"]
        counts = f"{n['answerable']} / {n['near_miss']} / {n['absent']}"
        for setting, what in SETTINGS.items():
            if setting in result:
                cells = " | ".join(_cell(result[setting][k]) for k, _ in COLUMNS)
                print(f"| {name} | {counts} | {what} | {cells} |")
    print("\nreliability (defaults): confidence bin: n, mean confidence / accuracy")
    for name, result in results.items():
        cells = "; ".join(
            f"{r['bin']}: {r['n']}, {r['confidence']:.2f}/{r['accuracy']:.2f}"
            for r in result["default"]["reliability"]
        )
        print(f"* {name}: {cells}")


def build(root: Path, args: argparse.Namespace) -> list[Corpus]:
    corpora = [*samples_corpora(), squad_corpus(root, args.answerable, args.seed)]
    corpora += [xquad_corpus(root, args.answerable, args.seed), *own_corpora()]
    return [c for c in corpora if not args.only or c.name in args.only]


def load_rows(path: Path) -> list[Row]:
    return [Row(**r) for r in json.loads(path.read_text())["rows"]]


def run_all(args: argparse.Namespace) -> list[Row]:
    import agentrag as ar
    from benchmarks.answers import database_url

    store = ar.Store(database_url(args.database))
    root = Path(tempfile.gettempdir()) / "agentrag-loco"
    rows: list[Row] = []
    started = time.perf_counter()
    for corpus in build(root, args):
        rows += run_corpus(store, corpus)
        print(f"  {corpus.name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    store.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--answerable", type=int, default=120, help="answerable questions per Wikipedia corpus"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", help="corpora to run (default: all)")
    parser.add_argument("--json", help="write the rows and figures here")
    parser.add_argument("--database", default="agentrag_loco", help="the benchmarks' database to use")
    parser.add_argument("--rows", help="report the rows of an earlier --json file instead of running")
    args = parser.parse_args(argv)
    rows = load_rows(Path(args.rows)) if args.rows else run_all(args)
    results: dict[str, dict[str, Any]] = {}
    names = list(dict.fromkeys(r.corpus for r in rows))
    for name in names:
        results[name] = {"default": as_configured([r for r in rows if r.corpus == name])}
        if len(names) > 2:
            results[name]["held_out"] = held_out(rows, name)
            results[name]["held_out_map"] = held_out_map(rows, name)
    report(results, "answers per corpus: the library's defaults, and leave-one-corpus-out")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"results": results, "rows": [asdict(r) for r in rows]}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
