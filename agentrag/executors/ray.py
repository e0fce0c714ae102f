"""Ingest on Ray: read and chunk on Ray tasks, embed on a pool of Ray actors (Ray Data ``map_batches``).

>>> from agentrag.executors.ray import RayExecutor
>>> store.ingest("docs/", collection="kb", executor=RayExecutor(actors=2))  # doctest: +SKIP

``agentrag ingest PATH --ray [ADDRESS]`` does the same from the command line.

What runs where:

* **driver** (the calling process): lists the files, looks up the stored versions (so workers
  skip unchanged documents without embedding them), and writes every prepared document through
  the same write path as a single-process ingest (``write_documents``: each document all or
  nothing). The report is the same.
* **Ray tasks**: read and chunk (:func:`agentrag.prepare_documents`), ``batch_documents`` documents
  per batch. Files are read where the task runs: on a cluster the paths must be visible to the
  workers (a shared filesystem), as they are on a local instance.
* **Ray actors** (``actors`` of them, each reserving ``cpus_per_actor`` CPUs and
  ``gpus_per_actor`` GPUs): embed (:func:`agentrag.embed_documents`). The store's embedder travels
  as its configuration (LocalEmbedder: model name and backends, the document backend as the driver
  decided it; LiteLLMEmbedder: its settings) and each actor loads the model that embeds documents
  once (``load_documents``, else ``load``); no database connection leaves the driver.

A document that fails on a worker (unreadable, invalid, an exception while chunking or
embedding it) is reported as that document's failure; the others still go in. An embedding
outage (every document of a batch fails) raises :class:`~agentrag.errors.EmbeddingError`, as in a
single-process ingest. Ray is imported when ``run`` is first called, never by ``import agentrag``.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from agentrag.errors import AgentragError, EmbeddingError, IngestError, InvalidInputError

if TYPE_CHECKING:
    from agentrag import Embedder, PreparedDocument

__all__ = ["RayExecutor"]

_OPTIONS = (
    "actors",
    "batch_documents",
    "cpus_per_actor",
    "gpus_per_actor",
    "num_cpus",
    "progress",
    "runtime_env",
)


class RayExecutor:
    """Prepare documents on Ray. ``address``: ``None`` or ``"local"`` start a local instance
    (unless Ray is already initialised in this process, which is then used as it is);
    ``"auto"`` or ``"ray://host:10001"`` connect to a cluster.

    Options (an unknown one raises ``TypeError`` here, a bad value InvalidInputError):

    * ``actors`` (1): size of the embedding actor pool.
    * ``batch_documents`` (64): documents per read/chunk batch and per embedding batch.
    * ``cpus_per_actor`` (1.0), ``gpus_per_actor`` (0.0): resources each embedding actor reserves
      (a GPU actor needs an embedder that uses the GPU; LocalEmbedder runs on the CPU).
    * ``num_cpus`` (None: all): CPUs of a local instance this executor starts.
    * ``progress`` (True): Ray Data's progress reporting for the run (the CLI turns it off and
      shows its own).
    * ``runtime_env`` (None): Ray's runtime environment for the workers (e.g. ``{"pip": [...]}``
      on a cluster whose workers lack agentrag).
    """

    def __init__(self, address: str | None = None, **options: Any) -> None:
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise TypeError(
                f"RayExecutor() got unknown option(s) {', '.join(unknown)}; it takes: {', '.join(_OPTIONS)}"
            )
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise InvalidInputError(f"address must be a non-empty string or None, got {address!r}")
        self.address = address
        self.actors = _positive_int(options.get("actors", 1), "actors")
        self.batch_documents = _positive_int(options.get("batch_documents", 64), "batch_documents")
        self.cpus_per_actor = _non_negative(options.get("cpus_per_actor", 1.0), "cpus_per_actor")
        self.gpus_per_actor = _non_negative(options.get("gpus_per_actor", 0.0), "gpus_per_actor")
        num_cpus = options.get("num_cpus")
        self.num_cpus = None if num_cpus is None else _positive_int(num_cpus, "num_cpus")
        runtime_env = options.get("runtime_env")
        if runtime_env is not None and not isinstance(runtime_env, dict):
            raise InvalidInputError(f"runtime_env must be a dict or None, got {type(runtime_env).__name__}")
        self.runtime_env = runtime_env
        progress = options.get("progress", True)
        if not isinstance(progress, bool):
            raise InvalidInputError(f"progress must be True or False, got {progress!r}")
        self.progress = progress

    def __repr__(self) -> str:
        return (
            f"RayExecutor({self.address or 'local'!r}, actors={self.actors}, "
            f"batch_documents={self.batch_documents}, gpus_per_actor={self.gpus_per_actor})"
        )

    def connect(self) -> None:
        """Initialise Ray (a no-op when it already is); ``run`` calls this first."""
        ray = _import_ray()
        if ray.is_initialized():
            return
        kwargs: dict[str, Any] = {"include_dashboard": False, "runtime_env": self.runtime_env}
        if self.address in (None, "local"):  # a local instance listens on 127.0.0.1 only
            kwargs.update(num_cpus=self.num_cpus, _node_ip_address="127.0.0.1")
        else:
            kwargs["address"] = self.address
        ray.init(**kwargs)

    def _check_resources(self, ray: Any) -> None:
        """On a local instance (no autoscaler to add nodes), refuse a pool that could never start."""
        if self.address not in (None, "local"):
            return
        have = ray.cluster_resources()
        for resource, each in (("CPU", self.cpus_per_actor), ("GPU", self.gpus_per_actor)):
            if each and each * self.actors > have.get(resource, 0.0):
                raise InvalidInputError(
                    f"{self.actors} embedding actor(s) x {each:g} {resource} need "
                    f"{each * self.actors:g} {resource}s; this Ray instance has {have.get(resource, 0.0):g}"
                )

    def run(
        self,
        documents: Iterable[PreparedDocument],
        *,
        embedder: Embedder,
        chunk_size: int,
        chunk_overlap: int,
    ) -> Iterator[PreparedDocument]:
        """Yield every document prepared, in the order given, as the pipeline produces them."""
        docs = list(documents)
        if not docs:
            return
        self.connect()
        import ray.data

        self._check_resources(ray)

        rows = [{"index": i, "doc": pickle.dumps(doc)} for i, doc in enumerate(docs)]
        blocks = max(1, math.ceil(len(rows) / self.batch_documents))
        dataset: ray.data.Dataset = ray.data.from_items(rows, override_num_blocks=blocks)
        dataset = dataset.map_batches(
            _prepare_batch,  # type: ignore[arg-type]  # Ray's batch type is a wide union
            batch_size=self.batch_documents,
            batch_format="numpy",
            fn_kwargs={"chunk_size": chunk_size, "chunk_overlap": chunk_overlap},
        )
        dataset = dataset.map_batches(
            _EmbedBatch,
            fn_constructor_kwargs={"embedder": embedder},
            compute=ray.data.ActorPoolStrategy(size=self.actors),
            num_cpus=self.cpus_per_actor,
            num_gpus=self.gpus_per_actor,
            batch_size=self.batch_documents,
            batch_format="numpy",
        )
        dataset.context.enable_progress_bars = self.progress  # this run's own copy of the context
        pending: dict[int, PreparedDocument] = {}
        following = 0
        try:
            for batch in dataset.iter_batches(batch_size=None, batch_format="numpy"):
                for index, blob, outage in zip(batch["index"], batch["doc"], batch["outage"], strict=True):
                    if len(outage):
                        raise pickle.loads(outage)  # the EmbeddingError, as single-process raises it
                    pending[int(index)] = pickle.loads(blob)
                while following in pending:  # in the order given, as soon as it is contiguous
                    yield pending.pop(following)
                    following += 1
        except ray.exceptions.RayError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, AgentragError):  # e.g. the model would not load in an actor
                raise cause from None
            raise IngestError(
                f"the Ray pipeline failed ({type(exc).__name__}); {following} of {len(docs)} documents"
                " were prepared and handed to the write stage"
            ) from None
        if following != len(docs):  # pragma: no cover - Ray returns every row it was given
            raise IngestError(f"Ray returned {following} of {len(docs)} documents")


def _prepare_batch(batch: dict[str, Any], *, chunk_size: int, chunk_overlap: int) -> dict[str, Any]:
    """Ray task: read, validate and chunk each document; a crash on one fails that one only."""
    import numpy as np

    from agentrag import prepare_documents

    out = []
    for blob in batch["doc"]:
        doc = pickle.loads(blob)
        try:
            prepare_documents([doc], chunk_size=chunk_size, chunk_overlap=chunk_overlap)
        except Exception as exc:
            doc.error = f"{doc.source}: {type(exc).__name__} while preparing it on a Ray worker"
        out.append(pickle.dumps(doc))
    return {"index": batch["index"], "doc": _objects(np, out)}


class _EmbedBatch:
    """Ray actor: holds one embedder (rebuilt from its configuration) and embeds batches of documents."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        # once per actor, before the first batch: the model that embeds documents (LocalEmbedder's
        # document_backend, which may be torch-bf16 while its queries run on onnx), else the model
        load = getattr(embedder, "load_documents", None) or getattr(embedder, "load", None)
        if callable(load):
            load()

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        from agentrag import embed_documents

        docs = [pickle.loads(blob) for blob in batch["doc"]]
        outage = b""
        try:
            embed_documents(docs, self.embedder)
        except EmbeddingError as exc:
            outage = pickle.dumps(exc)
        except Exception:
            for doc in docs:  # an unexpected error: find the documents that cause it
                try:
                    embed_documents([doc], self.embedder)
                except Exception as exc:
                    doc.error = f"{doc.source}: {type(exc).__name__} while embedding it on a Ray worker"
        return {
            "index": batch["index"],
            "doc": _objects(np, [pickle.dumps(doc) for doc in docs]),
            "outage": _objects(np, [outage] * len(docs)),
        }


def _objects(np: Any, values: list[bytes]) -> Any:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ModuleNotFoundError(
            "RayExecutor needs Ray: pip install 'agentrag[ray]' (or `make setup` in a checkout)"
        ) from exc
    return ray


def _positive_int(value: Any, name: str) -> int:
    if type(value) is not int or value < 1:
        raise InvalidInputError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _non_negative(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InvalidInputError(f"{name} must be a number >= 0, got {value!r}")
    return float(value)
