"""``agentrag sync SOURCE -c NAME``: keep a collection in sync with a folder or an fsspec URL."""

from __future__ import annotations

import argparse
from typing import Any

from agentrag.cli import common
from agentrag.cli.common import AddCommand, key_values, print_json

__all__ = ["register"]


def cmd_sync(args: argparse.Namespace) -> int:
    from agentrag.errors import CollectionNotFoundError, InvalidInputError

    if args.keep_revisions is not None and args.keep_revisions < 0:
        raise InvalidInputError(
            "--keep-revisions takes an integer >= 0 (the ended revisions kept per document)"
        )
    for flag, value, least in (
        ("--chunk-size", args.chunk_size, 1),
        ("--chunk-overlap", args.chunk_overlap, 0),
    ):
        if value is not None and value < least:
            raise InvalidInputError(f"{flag} takes an integer >= {least}, got {value}")
    store = common.open_store(args)
    try:
        store.collection(args.collection)
    except CollectionNotFoundError:
        if not args.create:
            raise CollectionNotFoundError(
                f"no collection named {args.collection!r}: create it first, or add --create"
            ) from None
        store.create_collection(args.collection, description=args.description or "")
    options: dict[str, Any] = {
        "collection": args.collection,
        "tenant": args.tenant,
        "workspace": args.workspace,
        "metadata": key_values(args.metadata, "--metadata"),
        "include": args.include or (),
        "exclude": args.exclude or (),
        "delete": not args.no_delete,
        "dry_run": args.dry_run,
        "keep_revisions": args.keep_revisions,
        "chunk_size": args.chunk_size,
        "chunk_overlap": args.chunk_overlap,
        "storage_options": key_values(args.storage_option, "--storage-option") or None,
    }
    failed = False

    def show(report: Any) -> None:
        nonlocal failed
        failed = failed or not report.ok
        print_json(report.to_dict()) if args.json else print(report, flush=True)

    if args.watch:
        from agentrag.store.sync_watch import watch

        if args.dry_run:
            raise InvalidInputError(
                "--watch and --dry-run do not go together: a dry run writes nothing to watch"
            )
        try:
            watch(store, args.source, on_report=show, debounce_ms=args.debounce, **options)
        except KeyboardInterrupt:
            return 0
        return 0
    show(store.sync(args.source, **options))
    return 1 if failed else 0


def register(sub: Any, add: AddCommand) -> None:
    p = add(
        sub,
        "sync",
        cmd_sync,
        "make a collection mirror a folder or URL (added, modified, deleted, renamed; unchanged files"
        " are not read again)",
    )
    p.add_argument(
        "source", help="a local folder, or an fsspec URL such as s3://bucket/prefix (the sync extra)"
    )
    p.add_argument("--collection", "-c", required=True)
    p.add_argument("--create", action="store_true", help="create the collection if it does not exist")
    p.add_argument("--description", help="description for --create")
    p.add_argument("--tenant")
    p.add_argument("--workspace")
    p.add_argument(
        "--metadata", "-m", action="append", metavar="KEY=VALUE", help="metadata of every document"
    )
    p.add_argument(
        "--include", action="append", metavar="GLOB", help="only keys matching a glob (repeatable)"
    )
    p.add_argument(
        "--exclude", action="append", metavar="GLOB", help="skip keys matching a glob (repeatable)"
    )
    p.add_argument(
        "--no-delete", action="store_true", help="keep the documents of files gone from the source"
    )
    p.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
    p.add_argument(
        "--keep-revisions",
        type=int,
        metavar="N",
        help="keep the text of at most N ended revisions per document (default: all)",
    )
    p.add_argument(
        "--chunk-size",
        type=int,
        metavar="N",
        help="characters per chunk (default 1000); an unchanged file chunked otherwise is rechunked",
    )
    p.add_argument("--chunk-overlap", type=int, metavar="N", help="characters of overlap (default 150)")
    p.add_argument(
        "--storage-option",
        action="append",
        metavar="KEY=VALUE",
        help="an fsspec storage option, e.g. endpoint_url=http://127.0.0.1:9000 (repeatable)",
    )
    p.add_argument("--watch", action="store_true", help="sync again whenever the (local) folder changes")
    p.add_argument("--debounce", type=int, default=1600, metavar="MS", help="--watch: wait for quiet (ms)")
