"""store.sync from S3: moto's S3-compatible server, started as a real process on 127.0.0.1, read
through s3fs (the ``sync`` extra). Nothing leaves the machine."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

import agentrag as ar
from tests.sync_support import rows

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120  # a bound for a failure only
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def bucket(s3_endpoint: str, collection_name: str):  # type: ignore[no-untyped-def]
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    name = collection_name.replace("_", "-")
    client.create_bucket(Bucket=name)
    return client, name


def options(endpoint: str) -> dict:  # type: ignore[type-arg]
    return {
        "endpoint_url": endpoint,
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"region_name": "us-east-1"},
    }


def test_sync_from_s3(store, s3_endpoint, bucket, collection_name) -> None:  # type: ignore[no-untyped-def]
    client, name = bucket
    put = lambda key, body: client.put_object(Bucket=name, Key=f"kb/{key}", Body=body.encode())  # noqa: E731
    put("a.md", "Alpha about apples.\n")
    put("b.md", "Beta about bananas.\n")
    put("sub/c.txt", "Gamma about cherries.\n")
    put("skip.bin", "not a document")
    store.create_collection(collection_name)
    url = f"s3://{name}/kb"
    first = store.sync(url, collection=collection_name, storage_options=options(s3_endpoint))
    assert first.added == ("a.md", "b.md", "sub/c.txt") and first.source == url
    again = store.sync(url, collection=collection_name, storage_options=options(s3_endpoint))
    assert again.read == 0 and again.unchanged == ("a.md", "b.md", "sub/c.txt")  # by ETag

    put("a.md", "Alpha about apricots now.\n")
    client.delete_object(Bucket=name, Key="kb/b.md")
    client.copy_object(
        Bucket=name, Key="kb/sub/moved.txt", CopySource={"Bucket": name, "Key": "kb/sub/c.txt"}
    )
    client.delete_object(Bucket=name, Key="kb/sub/c.txt")
    put("d.md", "Delta about dates.\n")
    report = store.sync(url, collection=collection_name, storage_options=options(s3_endpoint))
    assert (report.added, report.modified, report.deleted) == (("d.md",), ("a.md",), ("b.md",))
    assert report.renamed == (("sub/c.txt", "sub/moved.txt"),) and report.chunks_embedded == 2
    docs = {d.source: d for d in store.documents(collection_name)}
    assert sorted(docs) == ["a.md", "d.md", "sub/moved.txt"]
    assert docs["sub/moved.txt"].original_filename == "moved.txt"
    assert store.document(docs["a.md"].id).text == "Alpha about apricots now.\n"
    synced = rows(store, collection_name)
    assert synced["documents"] and len(synced["chunks"]) == 3


def test_an_unknown_bucket_is_a_typed_error(store, s3_endpoint, collection_name) -> None:  # type: ignore[no-untyped-def]
    store.create_collection(collection_name)
    with pytest.raises(ar.errors.SyncSourceError, match=r"no such folder or bucket|cannot be listed"):
        store.sync(
            "s3://no-such-bucket-x/kb", collection=collection_name, storage_options=options(s3_endpoint)
        )
    assert store.documents(collection_name) == []


def test_sidecar_grants_from_s3(store, s3_endpoint, bucket, collection_name) -> None:  # type: ignore[no-untyped-def]
    """A ``<key>.grants`` object is its file's sidecar (issue #26): applied on the first sync, a
    changed one regrants without re-embedding (seen by its ETag), a deleted one leaves no grants."""
    from sqlalchemy import text

    client, name = bucket
    put = lambda key, body: client.put_object(Bucket=name, Key=f"kb/{key}", Body=body.encode())  # noqa: E731
    put("a.md", "Alpha contract terms.\n")
    put("a.md.grants", "group:sales\n")
    put("b.md", "Beta contract terms.\n")
    store.create_collection(collection_name, acl=True)
    url, opts = f"s3://{name}/kb", options(s3_endpoint)

    def grants() -> dict[str, list[str]]:
        with store.engine.connect() as conn:
            found = conn.execute(
                text(
                    "SELECT d.source, d.grants FROM agentrag.documents d JOIN agentrag.collections k"
                    " ON k.id = d.collection_id WHERE k.name = :n"
                ),
                {"n": collection_name},
            ).all()
        return {source: sorted(g) for source, g in found}

    first = store.sync(url, collection=collection_name, storage_options=opts)
    assert first.added == ("a.md", "b.md") and grants() == {"a.md": ["g:sales"], "b.md": []}
    assert store.sync(url, collection=collection_name, storage_options=opts).read == 0

    put("a.md.grants", "group:legal\nuser:zoe\n")
    report = store.sync(url, collection=collection_name, storage_options=opts)
    assert report.regranted == ("a.md",) and report.read == 1 and report.chunks_embedded == 0
    assert report.document_ids["a.md"] == first.document_ids["a.md"]
    assert grants() == {"a.md": ["g:legal", "u:zoe"], "b.md": []}

    client.delete_object(Bucket=name, Key="kb/a.md.grants")
    report = store.sync(url, collection=collection_name, storage_options=opts)
    assert report.regranted == ("a.md",) and report.chunks_embedded == 0
    assert grants() == {"a.md": [], "b.md": []}
    scope = ar.Scope(principal=ar.Principal(groups=["legal", "sales"]))
    assert not store.search("contract", collections=collection_name, scope=scope).hits
