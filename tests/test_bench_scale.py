"""benchmarks/scale.py end to end at a tiny size, so the 1M-chunk benchmark cannot rot."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_scale_benchmark_runs_and_every_filtered_result_is_complete(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.scale",
            "--chunks",
            "2000",
            "--queries",
            "5",
            "--data",
            str(ROOT / "samples" / "beir_mini"),
            "--cache",
            str(tmp_path),
        ],
        cwd=ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    # the load, through the library's write path, beside its COPY floor
    assert re.search(
        r"\| agentrag `ingest_texts` per tenant.* \| 2,000 \| [\d.]+ \| [\d,]+ \| [\d.]+ \|", out
    )
    assert "| floor: one raw binary COPY of the same rows into agentrag.chunks | 2,000 |" in out
    assert "HNSW build" in out
    # memory of the BM25 index
    assert re.search(r"\| the index's own size .* \| \d[\d,]* MB \([\d,]+ bytes/chunk\)", out)
    # every mode under every restriction, each with its floor and no incomplete result
    rows = re.findall(
        r"^\| (vector|lexical|lexical_sql|hybrid) \| ([a-z 1%]+) \| .*\| (\d+) of 5 \| (.*) \|$", out, re.M
    )
    assert len(rows) == 12, out
    assert {(mode, cond) for mode, cond, _v, _u in rows} == {
        (m, c)
        for m in ("vector", "lexical", "lexical_sql", "hybrid")
        for c in ("unfiltered", "filter 1%", "tenant scope")
    }
    assert all(violations == "0" for _m, _c, violations, _u in rows), out
    assert all(used == f"{mode} x5" for mode, _c, _v, used in rows), out  # no silent switch of mode
    # recall against the exact scan
    recall = re.search(r"\| agentrag vector mode, unfiltered \| ([\d.]+) \|", out)
    assert recall and float(recall.group(1)) > 0.9
