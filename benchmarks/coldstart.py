"""CLI cold start: `agentrag search` / `agentrag ask` end to end, each run a new process.

    .venv/bin/python -m benchmarks.coldstart [--runs 5] [--before-ref 90f5e30] [--no-torch]

Wall time from process start to exit, the model cached on disk, the data directory's server
handled as each version handles it (a data directory of the run's own, removed after it):

* **before**: the code at ``--before-ref`` (extracted with ``git archive`` into a temporary
  directory and put first on ``PYTHONPATH``): sentence-transformers on torch, and the embedded
  server started and stopped by every call.
* **after**: this checkout: the ONNX backend (no torch import) and the server left running
  between calls (the first call after a ``db stop`` starts it: reported on its own row).
* **bytecode**: compiled for both before the runs (``compileall``), as pip leaves an install from
  a wheel, whatever ``PYTHONDONTWRITEBYTECODE`` says.
* **floors**: ``python -c pass``; the bare model loads (``onnxruntime`` + ``tokenizers`` +
  ``InferenceSession`` on the cached file; ``SentenceTransformer(path)`` for torch).

The runs of the rows interleave (row 1, row 2, ..., row 1, ...), so a busy neighbour on this
shared machine slows all rows alike; medians and minima are printed with the load average, and
the CPU time each call used (user + system, the process and the children it waited for; the
PostgreSQL server's own processes are not counted), which a busy machine inflates far less.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COLLECTION = "coldstart_docs"
QUERY = "how do I enable single sign-on"


def _run(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and the children it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before-ref", default="90f5e30", help="git ref of the 'before' code ('' to skip)")
    parser.add_argument(
        "--no-torch", action="store_true", help="skip the bare torch load (10-100 s a run on a busy machine)"
    )
    args = parser.parse_args()

    py = sys.executable
    # A data directory of its own: the run stops its server (`db stop`) to time a first call, which
    # on the shared one would abort whatever else uses it (another benchmark, a notebook)
    own = Path(tempfile.mkdtemp(prefix="agentrag-coldstart-"))
    env = {
        **os.environ,
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "AGENTRAG_DATA_DIR": str(own / "data"),
    }
    cli = [py, "-m", "agentrag"]
    # set up the collection once (this also exports the ONNX model into the cache if needed)
    subprocess.run(
        [*cli, "ingest", str(REPO / "samples" / "product_docs"), "-c", COLLECTION, "--create"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    from agentrag.embedders import LocalEmbedder

    onnx_path = LocalEmbedder(backend="onnx")._model().path
    from agentrag.embedders import bundled_minilm_path

    model_dir = bundled_minilm_path()
    search = ["search", QUERY, "-c", COLLECTION, "-k", "5"]
    ask = ["ask", QUERY, "-c", COLLECTION]
    rows: dict[str, list[str]] = {
        "floor: python -c pass": [py, "-c", "pass"],
        "floor: bare ONNX model load (onnxruntime + tokenizers + session)": [
            py,
            "-c",
            "import onnxruntime as o, tokenizers as t; "
            f"t.Tokenizer.from_file({str(Path(str(model_dir)) / 'tokenizer.json')!r}); "
            f"o.InferenceSession({str(onnx_path)!r}, providers=['CPUExecutionProvider'])",
        ],
        "floor: bare torch model load (SentenceTransformer)": [
            py,
            "-c",
            f"from sentence_transformers import SentenceTransformer as S; S({model_dir!r}, device='cpu')",
        ],
        "after: agentrag search (hybrid)": [*cli, *search],
        "after: agentrag ask (hybrid, no LLM)": [*cli, *ask],
    }
    if args.no_torch:
        rows.pop("floor: bare torch model load (SentenceTransformer)")
    before_dir = None
    if args.before_ref:
        before_dir = Path(tempfile.mkdtemp(prefix="agentrag-before-"))
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.before_ref, "agentrag", "prompts", "migrations"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(before_dir)], input=archive, check=True)
        rows[f"before ({args.before_ref}): agentrag search (hybrid)"] = [*cli, *search]
        rows[f"before ({args.before_ref}): agentrag ask (hybrid, no LLM)"] = [*cli, *ask]
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}

    before_env = env
    if before_dir is not None:
        # the old code gets its own data directory: it starts and stops its server on every call
        # (as it did), without stopping the server this checkout's CLI keeps running
        # and its own model cache: this checkout removes the export an older agentrag keyed by the
        # model's path in this same virtualenv (embedders.onnx.drop_superseded), which the old code
        # would then export again in every call
        before_env = {
            **env,
            "PYTHONPATH": str(before_dir),
            "AGENTRAG_DATA_DIR": str(before_dir / "data"),
            "AGENTRAG_MODEL_CACHE": str(before_dir / "models"),
        }
        subprocess.run(
            [*cli, "ingest", str(REPO / "samples" / "product_docs"), "-c", COLLECTION, "--create"],
            env=before_env,
            cwd=before_dir,  # the working directory comes first on sys.path: never this checkout
            check=True,
            stdout=subprocess.DEVNULL,
        )

    # Bytecode first, as pip leaves an install from a wheel: with PYTHONDONTWRITEBYTECODE set (some
    # shells and CI images set it) an editable checkout would otherwise compile ~130 modules from
    # source in every call (0.2-0.3 s of `ask` on the AMD machine), which no installed user pays.
    for tree in (REPO / "agentrag", *([before_dir / "agentrag"] if before_dir is not None else [])):
        compile_all = [py, "-m", "compileall", "-q", str(tree)]
        subprocess.run(compile_all, env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([*cli, "db", "stop"], env=env, check=True, stdout=subprocess.DEVNULL)
    first_after = _run([*cli, *search], env)  # starts the server, which then stays up
    for _ in range(args.runs):
        for name, argv in rows.items():
            before = name.startswith("before")
            times[name].append(_run(argv, before_env if before else env, before_dir if before else REPO))
    if before_dir is not None:
        shutil.rmtree(before_dir, ignore_errors=True)
    subprocess.run([*cli, "db", "stop", "--force"], env=env, check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(own, ignore_errors=True)

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n{args.runs} runs per row, interleaved; {os.cpu_count()} CPUs, load average {load} at the end")
    print("bytecode compiled before the runs (compileall), as an install from a wheel has it\n")
    print("| what | wall median s | wall min s | CPU median s (process + waited-for children) |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        walls = [w for w, _ in values]
        cpu = statistics.median(c for _, c in values)
        print(f"| {name} | {statistics.median(walls):.2f} | {min(walls):.2f} | {cpu:.2f} |")
    first = "after: agentrag search, first call after `db stop` (starts the server)"
    print(f"| {first} | {first_after[0]:.2f} | - | {first_after[1]:.2f} |")


if __name__ == "__main__":
    main()
