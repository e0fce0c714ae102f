"""Random ids from a pool of os.urandom bytes (agentrag._ids, agentrag.server.request_ids)."""

from __future__ import annotations

import os
import threading
import uuid

import pytest

from agentrag import _ids
from agentrag.context import Context
from agentrag.server import request_ids


def test_uuid4_is_a_version_4_uuid_and_the_context_query_id_is_one() -> None:
    made = _ids.uuid4()
    assert made.version == 4 and made.variant == uuid.RFC_4122
    query_id = uuid.UUID(Context(question="q").query_id)
    assert query_id.version == 4 and query_id.variant == uuid.RFC_4122


@pytest.mark.parametrize("make", [_ids.uuid4_hex, request_ids.request_id], ids=["uuid4", "request_id"])
def test_one_urandom_read_per_256_ids(make, monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the pool: getrandom (which releases the GIL) once per 256 ids, not per id."""
    reads: list[int] = []
    real = os.urandom

    def counted(n: int) -> bytes:
        reads.append(n)
        return real(n)

    monkeypatch.setattr(os, "urandom", counted)
    made = {make() for _ in range(1024)}
    assert len(made) == 1024 and all(len(m) == 32 and int(m, 16) >= 0 for m in made)
    assert len(reads) in (4, 5) and set(reads) == {4096}  # 5: the pool held a few ids already


@pytest.mark.parametrize("make", [_ids.uuid4_hex, request_ids.request_id], ids=["uuid4", "request_id"])
def test_threads_never_get_the_same_id(make) -> None:
    per_thread: list[list[str]] = [[] for _ in range(8)]

    def run(out: list[str]) -> None:
        for _ in range(3000):
            out.append(make())

    threads = [threading.Thread(target=run, args=(out,)) for out in per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for out in per_thread for i in out]
    assert len(set(every)) == len(every) == 24_000


@pytest.mark.parametrize("make", [_ids.uuid4_hex, request_ids.request_id], ids=["uuid4", "request_id"])
def test_a_forked_child_does_not_repeat_its_parents_ids(make) -> None:
    make()  # the pool holds 255 more ids now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, ",".join(make() for _ in range(10)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split(","))
    os.waitpid(pid, 0)
    parent = {make() for _ in range(10)}
    assert len(child) == 10 and not child & parent


def test_random_bytes_bounds_and_the_delimiter_comes_from_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentrag.prompts import new_delimiter

    with pytest.raises(ValueError):
        _ids.random_bytes(0)
    with pytest.raises(ValueError):
        _ids.random_bytes(4097)
    assert len(_ids.random_bytes(4096)) == 4096
    reads: list[int] = []
    real = os.urandom
    monkeypatch.setattr(os, "urandom", lambda n: reads.append(n) or real(n))
    delimiters = {new_delimiter() for _ in range(600)}  # 3,600 bytes: at most one read
    assert len(delimiters) == 600 and len(reads) <= 1
    assert all(d.startswith("SOURCE-") and len(d) == 19 and d[7:] == d[7:].upper() for d in delimiters)
