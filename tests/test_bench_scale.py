"""benchmarks/scale.py end to end at a tiny size, so the 1M-chunk benchmark cannot rot."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run_scale(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
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
            "--hnsw-m",
            "12",
            "--hnsw-ef-construction",
            "48",
            *extra,
        ],
        cwd=ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_scale_benchmark_runs_and_every_filtered_result_is_complete(tmp_path: Path) -> None:
    run = _run_scale(tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    # the load, through the library's write path, beside its COPY floor
    assert re.search(
        r"\| agentrag `ingest_texts` per tenant.* \| 2,000 \| [\d.]+ \| [\d,]+ \| [\d.]+ \|", out
    )
    assert "| floor: one raw binary COPY of the same rows into agentrag.chunks | 2,000 |" in out
    assert "the raw `CREATE INDEX`, m=12 ef_construction=48" in out  # the collection's own parameters
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
    recall = re.search(r"\| agentrag vector mode, unfiltered \(ef_search 100\) \| ([\d.]+) \|", out)
    assert recall and float(recall.group(1)) > 0.9
    sweep = re.findall(
        r"^\| raw HNSW SQL, ef_search (\d+), LIMIT 10 \| ([\d.]+) \| .* \| [\d.]+ \| [\d.]+ \|$", out, re.M
    )
    assert [int(e) for e, _r in sweep] == [40, 100, 200, 400, 800], out
    # storage: 384 float32 values and pgvector's 8-byte header per chunk
    assert "| vectors (`embedding`, sum of pg_column_size) | " in out
    assert re.search(r"\| vectors \(`embedding`.* \| 1,544 \|$", out, re.M), out


def test_the_scale_benchmark_measures_a_halfvec_collection_through_its_own_column(tmp_path: Path) -> None:
    run = _run_scale(tmp_path, "--vector-type", "halfvec", "--modes", "vector,hybrid")
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    # the load and its floor write float16 (2 bytes a dimension + the 8-byte header), not float32
    assert re.search(r"\| vectors \(`embedding_half`.* \| 776 \|$", out, re.M), out
    assert "| floor: one raw binary COPY of the same rows into agentrag.chunks | 2,000 |" in out
    rows = re.findall(r"^\| (vector|hybrid) \| ([a-z 1%]+) \| .*\| (\d+) of 5 \| (.*) \|$", out, re.M)
    assert len(rows) == 6 and all(v == "0" for _m, _c, v, _u in rows), out
    # the raw floor and the exact-scan reference state the halfvec expression the index is built on
    recall = re.search(r"\| agentrag vector mode, unfiltered \(ef_search 100\) \| ([\d.]+) \|", out)
    assert recall and float(recall.group(1)) > 0.9


def _toy_corpus(n: int = 40) -> tuple[list[str], Any]:
    import numpy as np

    from benchmarks.scale import DIMS

    rng = np.random.default_rng(3)
    base = rng.standard_normal((n, DIMS)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    # every sentence names its passage (mark{i}), so a chunk's text says which passages it holds
    passages = [
        " ".join(f"Sentence {j} of mark{i} is about topic {i} and detail {j}." for j in range(6))
        for i in range(n)
    ]
    return passages, base


def test_a_chunks_vector_mixes_the_vectors_of_exactly_the_passages_its_text_holds() -> None:
    import numpy as np

    from benchmarks.scale import mixtures, synthesize

    passages, base = _toy_corpus()
    texts, vectors = synthesize(300, passages, base, noise=0.0)
    sources, weights, same = mixtures(300, base, noise=0.0)
    assert np.array_equal(vectors, same)  # the text and the vector come from one draw
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    parts = 0
    for i, text in enumerate(texts):
        assert 520 <= len(text) <= 980
        held = {int(m) for m in re.findall(r"mark(\d+)", text)}
        mixed = {int(s) for s, w in zip(sources[i], weights[i], strict=True) if w > 0}
        assert held == mixed, (i, held, mixed)
        parts += len(mixed)
        mix = sum(w * base[s] for s, w in zip(sources[i], weights[i], strict=True))
        assert np.allclose(vectors[i], mix / np.linalg.norm(mix), atol=1e-5)
    assert 2.3 < parts / len(texts) < 2.7  # 2 or 3 passages, even odds


def test_the_synthesis_is_deterministic_and_its_noise_stays_in_the_corpus_directions() -> None:
    import numpy as np

    from benchmarks.scale import mixtures, synthesize

    passages, base = _toy_corpus()
    a = synthesize(100, passages, base, noise=0.6)
    b = synthesize(100, passages, base, noise=0.6)
    assert a[0] == b[0] and np.array_equal(a[1], b[1])
    clean = mixtures(100, base, noise=0.0)[2]
    noisy = a[1]
    cos = np.sum(clean * noisy, axis=1)
    assert 0.5 < cos.mean() < 0.999  # the noise moves each vector, without replacing it
    # corpus-shaped noise: within the span of the passages (an isotropic one would leave it)
    q, _r = np.linalg.qr(base.T.astype(np.float64))
    residual = noisy - (noisy @ q) @ q.T
    assert float(np.linalg.norm(residual, axis=1).max()) < 1e-4


def test_noise_out_of_range_is_refused(capsys) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from benchmarks.scale import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--noise", "-0.1", "--phase", "search"])
    assert exit_info.value.code == 2
    assert "--noise must be in [0, 2]" in capsys.readouterr().err


@pytest.mark.skipif(
    not os.access("/proc/sys/vm/drop_caches", os.W_OK), reason="dropping the page cache needs root"
)
def test_the_cold_cache_benchmark_reads_both_storage_types_after_dropping_the_page_cache(
    tmp_path: Path,
) -> None:
    for vector_type in ("vector", "halfvec"):
        load = _run_scale(tmp_path, "--vector-type", vector_type, "--phase", "load", "--keep")
        assert load.returncode == 0, load.stderr[-3000:]
    run = subprocess.run(
        [
            *(sys.executable, "-m", "benchmarks.scale_cold", "--chunks", "2000", "--rounds", "1"),
            *("--data", str(ROOT / "samples" / "beir_mini"), "--cache", str(tmp_path)),
        ],
        cwd=ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = re.findall(
        r"^\| (vector|halfvec) \| (agentrag vector mode|floor: raw HNSW SQL) \| [\d,]+ MB \| ([\d.]+) \| "
        r"[\d.]+ \| ([\d.]+) \| [\d.]+x \|$",
        run.stdout,
        re.M,
    )
    assert {(t, s) for t, s, _c, _w in rows} == {
        (t, s) for t in ("vector", "halfvec") for s in ("agentrag vector mode", "floor: raw HNSW SQL")
    }, run.stdout
    assert all(float(c) > 0 and float(w) > 0 for _t, _s, c, w in rows)
