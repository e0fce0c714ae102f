"""What the issue #37 hardening costs on the ingest and sync read paths, beside its floor.

    .venv/bin/python -m benchmarks.hostile_input [--records 40000] [--files 2000] [--repeats 5]

* **JSON depth check**: ``agentrag.readers.read`` of a JSON array of ``--records`` records (each
  a dict with a title, a text and a nested ``meta`` object: two brackets deep, about 15 MB), with
  the nesting check (``LIMITS.max_json_depth`` = 128: the bracket scan runs, since the file holds
  more brackets than that) beside the floor: the same read with the limit raised past the file's
  bracket count, so the check is one ``str.count`` and no scan.
* **sync's safe open**: ``LocalSource.read_bytes`` (open non-blocking, fstat, the opened path
  checked inside the root through ``/proc/self/fd``, read through that descriptor) over
  ``--files`` small files, beside the floor ``Path.read_bytes`` of the same files.

Rows alternate (floor, then the hardened read) ``--repeats`` times; medians. The load average
is printed: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def _json_file(folder: Path, records: int) -> Path:
    path = folder / "records.json"
    rows = [
        {
            "title": f"Record {i}",
            "text": f"Invoice {i} is payable net-30; late fees are two percent of the amount due. " * 4,
            "meta": {"tags": ["billing", f"t{i % 17}"], "owner": {"team": "finance", "id": i}},
        }
        for i in range(records)
    ]
    path.write_text(json.dumps(rows))
    return path


def _time(call, repeats: int) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - t0) / repeats


def bench_json(folder: Path, records: int, repeats: int) -> tuple[float, float, int]:
    from agentrag.readers import LIMITS, read

    path = _json_file(folder, records)
    brackets = path.read_text().count("[") + path.read_text().count("{")
    floor, checked = [], []
    for _ in range(repeats):
        LIMITS.max_json_depth = brackets + 1  # the count shortcut: no scan (the floor)
        floor.append(_time(lambda: read(path), 1))
        LIMITS.max_json_depth = 128
        checked.append(_time(lambda: read(path), 1))
    return statistics.median(floor), statistics.median(checked), path.stat().st_size


def bench_open(folder: Path, files: int, repeats: int) -> tuple[float, float]:
    from agentrag.store.sync_source import LocalSource

    root = folder / "tree"
    keys = []
    for i in range(files):
        key = f"d{i % 20}/f{i}.md"
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_text(f"Note {i}: the audit log records each access.\n" * 20)
        keys.append(key)
    source = LocalSource(root, (), ())
    floor, safe = [], []
    for _ in range(repeats):
        floor.append(_time(lambda: [(root / k).read_bytes() for k in keys], 1))
        safe.append(_time(lambda: [source.read_bytes(k) for k in keys], 1))
    return statistics.median(floor), statistics.median(safe)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--files", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        folder = Path(tmp)
        floor, checked, size = bench_json(folder, args.records, args.repeats)
        print(f"\nJSON read, {args.records:,} records ({size / 2**20:.1f} MB), median of {args.repeats}")
        print(f"  floor (no scan)          {floor * 1000:8.1f} ms")
        print(f"  with the depth check     {checked * 1000:8.1f} ms   {checked / floor:.2f}x")
        floor, safe = bench_open(folder, args.files, args.repeats)
        print(f"\nsync reads of {args.files:,} small files, median of {args.repeats}")
        print(f"  floor Path.read_bytes    {floor * 1e6 / args.files:8.1f} us/file")
        print(
            f"  LocalSource.read_bytes   {safe * 1e6 / args.files:8.1f} us/file   {safe / floor:.2f}x"
            f" (+{(safe - floor) * 1e6 / args.files:.1f} us)"
        )


if __name__ == "__main__":
    main()
