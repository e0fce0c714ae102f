"""The sample corpus (``samples/``: a note-taking app's docs, support answers and API reference),
as ``agentrag demo`` and ``agentrag serve --demo`` ingest it.

Both ingest it the same way, into collections of their own (``demo_product_docs``,
``demo_support``, ``demo_api``: ``SAMPLES_PREFIX`` and the folder's name) for tenant ``demo`` (an
unscoped search sees every tenant; the service's tenant ``demo`` sees it too), so running one after
the other leaves every document once: the second ingest finds them unchanged. A user's own
collections (the quickstart's ``docs`` and ``support``) never receive the demo's documents. An
installed wheel carries the samples inside the package (``agentrag/_data/samples``); a source
checkout has them at the top.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentrag.store.ingest import IngestReport
    from agentrag.store.store import Store

__all__ = ["SAMPLES_PREFIX", "SAMPLES_TENANT", "find_samples", "ingest_samples", "sample_collection"]

SAMPLES_TENANT = "demo"
SAMPLES_PREFIX = "demo_"  # the demo's collections: apart from any the user creates (issue #38)


def sample_collection(folder: str) -> str:
    """The collection the demo ingests the sample folder ``folder`` into: ``demo_support`` for
    ``support``."""
    return SAMPLES_PREFIX + folder


def find_samples(explicit: str | Path | None = None) -> Path:
    """The sample folder: ``explicit``, else ``./samples``, else the one shipped with agentrag.

    FileNotFoundError names the places looked in.
    """
    from agentrag._resources import resource_dir

    if explicit is not None:
        candidates = [Path(explicit)]
    else:
        candidates = [Path.cwd() / "samples"]
        with contextlib.suppress(FileNotFoundError):  # neither checkout nor wheel: named below
            candidates.append(resource_dir("samples"))
    for path in candidates:
        if (path / "collections.json").is_file():
            return path
    raise FileNotFoundError(
        f"no collections.json in {' or '.join(str(p) for p in candidates)}: pass the sample folder"
    )


def ingest_samples(
    store: Store,
    samples: str | Path | None = None,
    *,
    tenant: str = SAMPLES_TENANT,
    on_report: Callable[[IngestReport], None] | None = None,
    on_mismatch: Callable[[str], None] | None = None,
) -> list[str]:
    """Create the sample collections (if missing) and ingest their folders for ``tenant``.

    Each folder of ``collections.json`` goes into its own demo collection (:func:`sample_collection`:
    ``support`` -> ``demo_support``), with the folder's description. Idempotent: a second call finds
    every document unchanged. Returns the collection names.
    ``on_mismatch(name)`` handles a collection embedded by another model version (the demo
    re-embeds it); without it the EmbeddingMismatchError propagates.
    """
    from agentrag.errors import EmbeddingMismatchError

    folder = find_samples(samples)
    names = []
    for spec in json.loads((folder / "collections.json").read_text()):
        name = sample_collection(spec["name"])
        try:
            store.create_collection(name, description=spec["description"], exist_ok=True)
        except EmbeddingMismatchError:
            if on_mismatch is None:
                raise
            on_mismatch(name)
        report = store.ingest(folder / spec["name"], collection=name, tenant=tenant)
        if on_report is not None:
            on_report(report)
        names.append(name)
    return names
