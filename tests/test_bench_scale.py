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


def test_noise_is_the_only_part_of_a_synthetic_vector_outside_the_real_passages_span() -> None:
    import numpy as np

    from benchmarks.scale import DIMS, synthesize

    rng = np.random.default_rng(3)
    base = rng.standard_normal((30, DIMS)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    passages = [f"Passage {i} says one thing. It says another thing about {i}." for i in range(30)]
    q, _r = np.linalg.qr(base.T.astype(np.float64))  # an orthonormal basis of the passages' span

    def outside(noise: float) -> float:
        texts, vectors = synthesize(200, passages, base, noise=noise)
        assert len(texts) == 200 and vectors.shape == (200, DIMS)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
        residual = vectors - (vectors @ q) @ q.T
        return float(np.linalg.norm(residual, axis=1).mean())

    assert outside(0.0) < 1e-5  # mixtures of real passages' vectors only
    assert 0.3 < outside(0.45) < 0.5  # isotropic noise: almost all of it leaves the span


def test_noise_out_of_range_is_refused(capsys) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from benchmarks.scale import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--noise", "-0.1", "--phase", "search"])
    assert exit_info.value.code == 2
    assert "--noise must be in [0, 2]" in capsys.readouterr().err
