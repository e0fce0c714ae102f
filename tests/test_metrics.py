"""``GET /metrics`` of a real ``agentrag serve``, scraped and parsed with ``prometheus_client``'s parser."""

from __future__ import annotations

from typing import Any

import pytest

from tests.interfaces_support import make_corpus
from tests.server_support import Server, auth, new_tenant

parser = pytest.importorskip("prometheus_client.parser")

QUESTION = "Where is the secret zanzibar-quokka question text?"


@pytest.fixture(scope="module")
def corpus(store: Any) -> dict[str, Any]:
    return make_corpus(store, "met")


def scrape(client: Any) -> dict[str, Any]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in parser.text_string_to_metric_families(response.text)}
    return {"families": families, "text": response.text}


def samples(families: dict[str, Any], family: str, suffix: str = "", **labels: str) -> list[Any]:
    return [
        s
        for s in families[family].samples
        if s.name == family + suffix and all(s.labels.get(k) == v for k, v in labels.items())
    ]


def test_metrics_cover_requests_modes_pools_and_refusals(
    client: Any, server: Server, corpus: dict[str, Any], store: Any
) -> None:
    route = "/api/v1/query/{tenant_id}/search"
    for mode in ("hybrid", "vector", "lexical"):
        body = {"query_text": QUESTION, "collections": [corpus["collection"]], "mode": mode}
        r = client.post(f"/api/v1/query/{corpus['a']}/search", json=body, headers=auth(corpus["a"]))
        assert r.status_code == 200, r.text
    limited = new_tenant(store, "metlim", rate_limit=1, rate_limit_period_s=3600)
    statuses = [
        client.post(
            f"/api/v1/query/{limited}/search", json={"query_text": "terms?"}, headers=auth(limited)
        ).status_code
        for _ in range(3)
    ]
    assert statuses.count(429) == 2

    scraped = scrape(client)
    families, text = scraped["families"], scraped["text"]
    assert all(f.type != "unknown" for f in families.values()), [
        n for n, f in families.items() if f.type == "unknown"
    ]
    # request counts and durations per route and status (a histogram in seconds)
    ok = samples(families, "http_server_request_duration_seconds", "_count", route=route, status="200")
    assert ok and sum(s.value for s in ok) >= 3
    buckets = samples(families, "http_server_request_duration_seconds", "_bucket", route=route, status="200")
    assert {s.labels["le"] for s in buckets} >= {"0.005", "0.1", "1.0", "+Inf"}
    # search latency per mode
    for mode in ("hybrid", "vector", "lexical"):
        assert samples(families, "retriever_search_duration_ms", "_count", mode=mode), mode
    # rate-limit refusals, per route
    refused = samples(families, "agentrag_rate_limit_refusals", "_total", route=route)
    assert refused and refused[0].value >= 2
    # pool usage
    pools = {
        (s.labels["pool"], s.labels["state"]): s.value
        for s in families["agentrag_db_pool_connections"].samples
    }
    assert pools[("search", "size")] >= 1 and ("admission", "checked_out") in pools
    # no question text, tenant or concrete path in any label or value
    for secret in ("zanzibar", "quokka", corpus["a"], limited):
        assert secret not in text


def test_active_requests_are_what_is_in_flight_when_scraped(client: Any, corpus: dict[str, Any]) -> None:
    """Counted on the event loop, observed at the scrape: the scrape itself is the one GET in flight,
    and the searches that came before it are done (their series read 0, not their count)."""
    for _ in range(2):
        body = {"query_text": QUESTION, "collections": [corpus["collection"]]}
        r = client.post(f"/api/v1/query/{corpus['a']}/search", json=body, headers=auth(corpus["a"]))
        assert r.status_code == 200, r.text
    families = scrape(client)["families"]
    active = {
        (s.labels["method"], s.labels["scheme"]): s.value
        for s in families["http_server_active_requests"].samples
    }
    assert active[("GET", "http")] == 1
    assert active[("POST", "http")] == 0


def test_metrics_of_an_app_given_its_own_telemetry_are_the_apps_to_export(store: Any) -> None:
    """``create_app(telemetry=...)``: the application exports its own providers; no /metrics route."""
    import agentrag as ar
    from agentrag.server import ServerConfig, create_app

    app = create_app(store, config=ServerConfig(embedder="fake:64"), telemetry=ar.Telemetry())
    assert "/metrics" not in {getattr(r, "path", None) for r in app.routes}
    assert "/v1/chat/completions" in {getattr(r, "path", None) for r in app.routes}


def test_metrics_can_be_turned_off(store: Any) -> None:
    from agentrag.server import ServerConfig, create_app

    assert ServerConfig.from_env({"AGENTRAG_METRICS": "false"}).metrics is False
    assert ServerConfig.from_env({"AGENTRAG_METRICS": "1"}).metrics is True
    assert ServerConfig.from_env(ServerConfig(metrics=False).to_env()).metrics is False
    app = create_app(store, config=ServerConfig(embedder="fake:64", metrics=False))
    assert "/metrics" not in {getattr(r, "path", None) for r in app.routes}
    on = create_app(store, config=ServerConfig(embedder="fake:64"))
    assert "/metrics" in {getattr(r, "path", None) for r in on.routes}
