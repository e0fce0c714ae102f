"""Issue #38 item 3: the public API is pinned. Every name of ``agentrag.__all__`` and every public
signature (functions, classes and their methods, properties, enum members, model fields) is a
snapshot: a change fails here until it is announced, i.e. the snapshot is updated
(``pytest tests/test_api_surface.py --snapshot-update``) in the same commit as its CHANGELOG.md
entry (docs/explanation/releases.md: what may change in which release)."""

from __future__ import annotations

import subprocess
import sys

from syrupy.assertion import SnapshotAssertion

from tests.api_surface import surface
from tests.conftest import REPO


def test_the_public_api_is_as_announced(snapshot: SnapshotAssertion) -> None:
    assert surface() == snapshot


def test_the_surface_reads_in_any_process_alike() -> None:
    """The text depends on nothing but the code (no addresses, no hash order)."""
    code = "from tests.api_surface import surface; import sys; sys.stdout.write(surface())"
    runs = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO), "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert runs == {surface()}
