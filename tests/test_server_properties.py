"""Properties of the serving API over real HTTP: tenant isolation, no query text anywhere, no 5xx."""

from __future__ import annotations

import json
import random
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server_support import Server, audit_of, auth, new_tenant

MODES = ("hybrid", "vector", "lexical", "lexical_sql")
WORDS = [
    "invoice",
    "payment",
    "contract",
    "renewal",
    "audit",
    "security",
    "password",
    "leave",
    "salary",
    "budget",
    "forecast",
    "revenue",
    "churn",
    "onboarding",
    "backup",
    "restore",
    "latency",
    "region",
    "cluster",
    "quota",
    "tenant",
    "export",
]


@pytest.fixture(scope="module")
def two_tenants(store: Any) -> dict[str, Any]:
    rng = random.Random(5)
    collection = f"iso_{uuid.uuid4().hex[:8]}"
    store.create_collection(collection)
    a = new_tenant(store, "a", rate_limit=100_000)
    b = new_tenant(store, "b", rate_limit=100_000)
    b_texts = []
    for i in range(8):
        text_a = " ".join(rng.choice(WORDS) for _ in range(12))
        store.ingest_text(text_a, collection=collection, source=f"a{i}", tenant=a)
        text_b = f"secret{i} " + " ".join(rng.choice(WORDS) for _ in range(12))
        store.ingest_text(text_b, collection=collection, source=f"b{i}", tenant=b)
        b_texts.append(text_b)
    return {
        "collection": collection,
        "a": a,
        "b": b,
        "a_docs": {d.id for d in store.documents(collection, tenant=a)},
        "b_docs": {d.id for d in store.documents(collection, tenant=b)},
        "b_texts": b_texts,
    }


def test_tenant_b_documents_never_reach_tenant_a(server: Server, two_tenants: dict[str, Any]) -> None:
    import httpx

    rng = random.Random(11)
    t = two_tenants
    queries = []
    for i in range(1000):  # B's own texts (B's nearest document) and random mixes, in every mode
        text = rng.choice(t["b_texts"]) if i % 2 else " ".join(rng.sample(WORDS, 4)) + f" secret{i % 8}"
        queries.append(
            {"query_text": text, "mode": MODES[i % 4], "top_k": 10, "collections": [t["collection"]]}
        )

    with httpx.Client(base_url=server.url, timeout=30) as client:

        def ask(tenant: str, payload: dict[str, Any]) -> list[str]:
            r = client.post(f"/api/v1/query/{tenant}/search", json=payload, headers=auth(tenant))
            assert r.status_code == 200, r.text
            return [c["doc_id"] for c in r.json()["chunks"]]

        # the control: as B, these queries do find B's documents first
        for mode in MODES:
            first = ask(
                t["b"], {"query_text": t["b_texts"][3], "mode": mode, "collections": [t["collection"]]}
            )
            assert first and first[0] in t["b_docs"]
        with ThreadPoolExecutor(8) as pool:
            found = list(pool.map(lambda q: ask(t["a"], q), queries))
    returned = {doc for docs in found for doc in docs}
    assert returned and returned <= t["a_docs"]
    assert not returned & t["b_docs"]


def test_a_canary_in_the_query_appears_in_no_log_span_audit_row_or_error_body(
    server: Server, client: Any, store: Any, two_tenants: dict[str, Any]
) -> None:
    from sqlalchemy import text

    from agentrag.testing import FakeEmbedder

    canary = f"CANARY{uuid.uuid4().hex}"
    t = two_tenants
    base = {"query_text": f"invoice {canary} payment", "collections": [t["collection"]]}
    broken = f"dims_{uuid.uuid4().hex[:8]}"
    store.create_collection(broken, embedder=FakeEmbedder(8, model_id="other"))
    limited = new_tenant(store, rate_limit=1, rate_limit_period_s=600)
    url = f"/api/v1/query/{t['a']}"
    bodies: list[str] = []
    requests = [
        ("search", base, auth(t["a"]), 200),
        ("ask", base, auth(t["a"]), 200),
        ("ask", base, {**auth(t["a"]), "Accept": "text/event-stream"}, 200),
        ("search", {**base, "mode": "vector", "collections": [broken]}, auth(t["a"]), 500),
        ("search", {**base, "extra": canary}, auth(t["a"]), 422),
        ("search", {**base, "top_k": 99}, auth(t["a"]), 422),
        ("search", {**base, "query_text": canary * 200}, auth(t["a"]), 422),
        ("search", {**base, "filters": {"classification": []}}, auth(t["a"]), 422),
        ("search", {**base, "collections": ["nope"]}, auth(t["a"]), 404),
        ("search", base, {"Authorization": "Bearer x.y.z"}, 401),
        ("search", base, auth(t["b"]), 403),
    ]
    for endpoint, payload, headers, status in requests:
        r = client.post(f"{url}/{endpoint}", json=payload, headers=headers)
        assert r.status_code == status, (endpoint, r.text)
        if status == 200 and r.headers["content-type"].startswith("application/json"):
            audit_of(store.engine, r.json()["query_id"], 1)  # written by the server's audit writer
        if status >= 400:
            bodies.append(r.text)
    for _ in range(2):
        r = client.post(f"/api/v1/query/{limited}/search", json=base, headers=auth(limited))
        bodies.append(r.text)
    assert r.status_code == 429
    assert not [b for b in bodies if canary in b]
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT to_jsonb(e)::text FROM agentrag.audit_events e")).scalars().all()
    assert rows and not [row for row in rows if canary in row]
    spans = [json.dumps(item) for item in server.telemetry()]
    assert any('"agentrag.search"' in s for s in spans)
    assert not [s for s in spans if canary in s]
    log = server.log()
    assert "POST /api/v1/query/" in log  # the access log is there
    assert canary not in log


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def _bodies(collection: str) -> st.SearchStrategy[Any]:
    filters = st.fixed_dictionaries(
        {},
        optional={
            "classification": st.one_of(
                st.text(max_size=10), st.lists(st.text(max_size=10), max_size=3), JSON
            ),
            "doc_ids": st.one_of(st.lists(st.text(max_size=24), max_size=3), JSON),
            "date_range": st.one_of(
                st.fixed_dictionaries(
                    {}, optional={"start": st.dates().map(str), "end": st.dates().map(str)}
                ),
                JSON,
            ),
        },
    )
    bodies = st.fixed_dictionaries(
        {},
        optional={
            "query_text": st.one_of(st.text(max_size=60), JSON),
            "top_k": st.one_of(st.integers(-3, 60), JSON),
            "filters": st.one_of(filters, JSON),
            "mode": st.one_of(st.sampled_from([*MODES, "other"]), JSON),
            "collections": st.one_of(st.just([collection]), st.lists(st.text(max_size=10), max_size=2), JSON),
            "surprise": JSON,
        },
    )
    valid = st.fixed_dictionaries(
        {
            "query_text": st.text(alphabet="abcdefghij xyz", min_size=1, max_size=30).filter(str.strip),
            "collections": st.just([collection]),
        },
        optional={"top_k": st.integers(1, 10), "mode": st.sampled_from(MODES), "filters": filters},
    )
    return st.one_of(valid, bodies, bodies, JSON)


@pytest.fixture(scope="module")
def fuzz_target(store: Any, two_tenants: dict[str, Any]) -> dict[str, Any]:
    return two_tenants


def test_generated_bodies_get_2xx_or_a_json_4xx_never_5xx(
    server: Server, fuzz_target: dict[str, Any]
) -> None:
    import httpx

    t = fuzz_target
    client = httpx.Client(base_url=server.url, timeout=30)
    statuses: list[int] = []

    @settings(
        max_examples=120,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        derandomize=True,
    )
    @given(payload=_bodies(t["collection"]), endpoint=st.sampled_from(["search", "ask"]))
    def check(payload: Any, endpoint: str) -> None:
        r = client.post(f"/api/v1/query/{t['a']}/{endpoint}", json=payload, headers=auth(t["a"]))
        statuses.append(r.status_code)
        assert r.status_code < 500, r.text
        if r.status_code >= 400:
            assert set(r.json()) == {"error"} and r.json()["error"]["code"]

    try:
        check()
    finally:
        client.close()
    assert 200 in statuses and 422 in statuses  # both paths were exercised
