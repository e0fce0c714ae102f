"""Answers (issue #23): fact hit, sources cited, abstention and false-grounded rates, follow-ups and
the support check, on two question sets, beside the behaviour of an earlier commit in the same run.

    .venv/bin/python -m benchmarks.answers [--baseline 697a508] [--support 200] [--scifact 50]

* ``samples/answers/samples.jsonl`` over the sample corpus (``samples/``) and
  ``samples/answers/library.jsonl`` over a second corpus in another domain and style
  (``samples/library/``): the chat pipeline with local strategies and default settings, scored by
  :mod:`agentrag.eval.answers`;
* the support check (:mod:`agentrag.eval.support_check`) on ``--support`` scripted FakeLLM replies
  written from the sample corpus's hits;
* SciFact (``AGENTRAG_BEIR_PATH``): the gold document cited for ``--scifact`` test claims, and
  abstention when their gold documents are left out, over a collection of the claims' BM25 top-20
  candidates plus their gold documents (embedded once per database; see _answers_worker.scifact);
* the baseline row: the same measurement code run from a ``git archive`` of ``--baseline`` (the
  library as it was, with this checkout's ``agentrag/eval/answers.py`` and ``support_check.py``
  copied in) in its own database, in the same run.

Each side runs in its own process (benchmarks/_answers_worker.py). ``--json FILE`` keeps both
sides' metrics and per-question outcomes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._paths import CHECKOUT, scifact_path

BASELINE = "697a508"
SETS = (("samples/answers/samples.jsonl", "samples"), ("samples/answers/library.jsonl", "samples/library"))
ROWS = (
    ("fact_hit", "fact hit (answerable)"),
    ("source_hit", "right source cited"),
    ("fact_retrieved", "fact in the retrieved chunks"),
    ("answerable_abstained", "answerable that abstained"),
    ("abstention_precision", "abstention precision"),
    ("abstention_recall", "abstention recall"),
    ("false_grounded_in_domain", "false-grounded, in-domain"),
    ("false_grounded_out_of_domain", "false-grounded, out-of-domain"),
    ("small_talk_grounded", "small talk grounded / full"),
    ("followup_fact_hit", "follow-up fact hit"),
    ("answer_ms_p50", "answer step p50 (ms), first pass"),
    ("answer_ms_p50_warm", "answer step p50 (ms), second pass"),
)


def database_url(name: str) -> str:
    """The URL of database ``name`` on the benchmarks' server, created if missing."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from agentrag.store.server import database_url as server_url

    base = make_url(server_url())
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if not conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).scalar():
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base.set(database=name).render_as_string(hide_password=False)


def archive(commit: str, into: Path) -> Path:
    """``git archive`` of ``commit`` extracted in ``into``, with this checkout's measurement code."""
    into.mkdir(parents=True, exist_ok=True)
    tar = subprocess.run(["git", "archive", commit], cwd=CHECKOUT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    for name in ("answers.py", "support_check.py"):
        shutil.copy(CHECKOUT / "agentrag" / "eval" / name, into / "agentrag" / "eval" / name)
    shutil.copy(CHECKOUT / "benchmarks" / "_answers_worker.py", into / "_answers_worker.py")
    return into


def run_side(root: Path, worker: Path, url: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    command = [
        sys.executable,
        str(worker),
        "--database-url",
        url,
        "--out",
        str(out),
        "--seed",
        str(args.seed),
    ]
    for file, corpus in SETS:
        command += ["--set", f"{CHECKOUT / file}={CHECKOUT / corpus}"]
    command += ["--support", str(args.support)]
    data = scifact_path()
    if args.scifact and (data / "corpus.jsonl").is_file():
        command += ["--scifact", str(args.scifact), "--scifact-path", str(data)]
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run(command, cwd=root, env=env, check=True)
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) and value <= 1.0 else f"{value}"


def report(sides: dict[str, dict[str, Any]]) -> None:
    names = list(sides)
    for i, (file, _) in enumerate(SETS):
        counts = sides[names[-1]]["sets"][i]["metrics"]["counts"]
        print(f"\n{file}: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
        print("| metric | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for key, label in ROWS:
            print(
                f"| {label} | "
                + " | ".join(_cell(sides[n]["sets"][i]["metrics"].get(key)) for n in names)
                + " |"
            )
        for fact in ("prose", "list", "table"):
            cells = [_cell(sides[n]["sets"][i]["metrics"]["fact_hit_by_type"].get(fact)) for n in names]
            print(f"| fact hit, {fact} | " + " | ".join(cells) + " |")
    if all("support_check" in sides[n]["sets"][0] for n in names):
        print(f"\nsupport check, {sides[names[-1]]['sets'][0]['support_check']['replies']} scripted replies")
        print("| | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for key in ("unsupported_flagged", "supported_kept", "flag_precision"):
            print(
                f"| {key} | "
                + " | ".join(_cell(sides[n]["sets"][0]["support_check"][key]) for n in names)
                + " |"
            )
        forms = sides[names[-1]]["sets"][0]["support_check"]["by_form"]
        for form in forms:
            cells = [
                sides[n]["sets"][0]["support_check"]["by_form"].get(form, {}).get("flagged") for n in names
            ]
            print(
                f"| flagged: {form} ({forms[form]['sentences']}) | "
                + " | ".join(_cell(c) for c in cells)
                + " |"
            )
    if all("latency" in sides[n] for n in names):
        lat = sides[names[-1]]["latency"]
        print(f"\nanswer step alone, {lat['hits']} hits, {lat['questions']} questions: p50 (ms)")
        print("| | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for key, label in (
            ("cold_p50", "first call"),
            ("warm_p50", "second call, same hits"),
            ("floor_p50", "floor: the hits' sentences embedded once"),
        ):
            print(f"| {label} | " + " | ".join(_cell(sides[n]["latency"][key]) for n in names) + " |")
    if all("scifact" in sides[n] for n in names):
        sf = sides[names[-1]]["scifact"]
        print(
            f"\nSciFact, {sf['claims']} test claims, over their pool of {sf['pool_documents']} documents "
            f"({sf['left_out_documents']} gold documents left out for the *_without_gold rows)"
        )
        print("| | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for key in ("gold_cited", "abstained_with_gold", "abstained_without_gold", "grounded_without_gold"):
            print(f"| {key} | " + " | ".join(_cell(sides[n]["scifact"][key]) for n in names) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", default=BASELINE, help="commit of the baseline row ('none': skip it)")
    parser.add_argument("--support", type=int, default=200, help="scripted LLM replies (default 200)")
    parser.add_argument("--scifact", type=int, default=50, help="SciFact claims (0: skip; default 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write both sides' metrics and outcomes to this file")
    args = parser.parse_args(argv)

    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=CHECKOUT, capture_output=True, text=True
    )
    current = f"this checkout ({head.stdout.strip() or '?'})"
    sides: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="agentrag-answers-") as tmp:
        if args.baseline != "none":
            print(f"baseline: {args.baseline} (git archive, its own database)", file=sys.stderr)
            root = archive(args.baseline, Path(tmp) / "baseline")
            url = database_url(f"agentrag_bench_{args.baseline}")
            sides[f"baseline {args.baseline}"] = run_side(
                root, root / "_answers_worker.py", url, args, Path(tmp) / "b.json"
            )
        print(f"current: {current}", file=sys.stderr)
        worker = CHECKOUT / "benchmarks" / "_answers_worker.py"
        sides[current] = run_side(
            CHECKOUT, worker, database_url("agentrag_bench"), args, Path(tmp) / "c.json"
        )
    report(sides)
    if args.json:
        Path(args.json).write_text(json.dumps(sides, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
