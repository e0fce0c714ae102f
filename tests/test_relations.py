"""Knowledge-graph relations: the store API, the neighbourhood walk, enrich() and the CLI."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrag import Scope, cli
from agentrag.errors import CollectionNotFoundError, InvalidInputError, ScopeError
from agentrag.steps import aenrich, enrich, new
from agentrag.store.relations import Relation, format_triples, read_triples
from agentrag.store.store import Store


@pytest.fixture
def graph_collection(store: Store) -> str:
    name = f"g_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, description="graph test")
    return name


CHAIN = [
    ("Lumen Sync", "depends on", "Storage Service"),
    ("Storage Service", "runs on", "PostgreSQL"),
    ("PostgreSQL", "is backed up by", "Backup Job"),
    ("Backup Job", "alerts", "Lumen Sync"),  # a cycle back to the start
    ("Mobile App", "uses", "lumen sync"),  # different case, same entity
]


def test_add_relations_is_idempotent(store: Store, graph_collection: str) -> None:
    assert store.add_relations(graph_collection, CHAIN, source="architecture.md") == 5
    assert store.add_relations(graph_collection, CHAIN) == 0
    assert store.add_relations(graph_collection, [{"subject": "A", "relation": "b", "object": "C"}]) == 1
    assert store.add_relations(graph_collection, [("A", "b", "C", "elsewhere.md")]) == 0
    rows = store.relations(graph_collection)
    assert len(rows) == 6
    assert rows[0].source == "architecture.md" and rows[-1].source is None
    assert str(rows[0]) == "Lumen Sync --depends on--> Storage Service"


def test_bad_triples_are_refused(store: Store, graph_collection: str) -> None:
    with pytest.raises(InvalidInputError):
        store.add_relations(graph_collection, [("A", "", "C")])
    with pytest.raises(InvalidInputError):
        store.add_relations(graph_collection, [("A", "b")])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError):
        store.add_relations(graph_collection, [{"subject": "A", "relation": "b", "object": "C", "x": 1}])
    with pytest.raises(CollectionNotFoundError):
        store.add_relations("no_such_collection", [("A", "b", "C")])


def test_relations_filter_case_insensitively(store: Store, graph_collection: str) -> None:
    store.add_relations(graph_collection, CHAIN)
    touching = store.relations(graph_collection, entity="LUMEN SYNC")
    assert {(r.subject, r.object) for r in touching} == {
        ("Lumen Sync", "Storage Service"),
        ("Backup Job", "Lumen Sync"),
        ("Mobile App", "lumen sync"),
    }
    assert [r.relation for r in store.relations(graph_collection, relation="RUNS ON")] == ["runs on"]


def test_neighbourhood_depth_and_cycles(store: Store, graph_collection: str) -> None:
    store.add_relations(graph_collection, CHAIN)
    one = store.neighbourhood(graph_collection, "lumen sync", 1)
    assert {r.hop for r in one} == {1}
    assert len(one) == 3
    two = store.neighbourhood(graph_collection, "Lumen Sync", 2)
    assert len(two) == 5 and {r.hop for r in two} == {1, 2}
    assert [r.hop or 0 for r in two] == sorted(r.hop or 0 for r in two)  # nearest first
    # the cycle (Backup Job -> Lumen Sync) terminates, and each triple comes back once
    five = store.neighbourhood(graph_collection, "Lumen Sync", 5)
    assert len(five) == len({r.id for r in five}) == 5
    assert store.neighbourhood(graph_collection, "nobody", 3) == []


def test_neighbourhood_is_bounded(store: Store, graph_collection: str) -> None:
    star = [("Hub", "links", f"Spoke {i}") for i in range(300)]
    store.add_relations(graph_collection, star)
    assert len(store.neighbourhood(graph_collection, "hub", 2, limit=50)) == 50
    assert len(store.neighbourhood(graph_collection, "hub", 1)) == 200  # the default cap
    with pytest.raises(InvalidInputError):
        store.neighbourhood(graph_collection, "hub", 0)
    with pytest.raises(InvalidInputError):
        store.neighbourhood(graph_collection, "hub", 99)


def test_values_are_bound_parameters(store: Store, graph_collection: str) -> None:
    nasty = "O'Brien'); DROP TABLE agentrag.relations; --"
    assert store.add_relations(graph_collection, [(nasty, "knows", "%(x)s :entity")]) == 1
    found = store.neighbourhood(graph_collection, nasty.upper(), 1)
    assert [(r.subject, r.object) for r in found] == [(nasty, "%(x)s :entity")]


def test_format_triples_labels_each_fact(store: Store, graph_collection: str) -> None:
    store.add_relations(graph_collection, CHAIN[:1], source="a.md")
    (rel,) = store.relations(graph_collection)
    assert (
        format_triples([rel]) == f"[rel_{rel.id}] Lumen Sync --depends on--> Storage Service (source: a.md)"
    )


# ---- enrich -------------------------------------------------------------------------------------
def test_enrich_with_an_entity(store: Store, graph_collection: str) -> None:
    store.add_relations(graph_collection, CHAIN)
    ctx = new("Why is sync slow?", store=store, collections=graph_collection).enrich(
        entity="Lumen Sync", depth=2
    )
    assert ctx.graph_context is not None
    lines = ctx.graph_context.splitlines()
    assert len(lines) == 5 and all(line.startswith("[rel_") for line in lines)
    assert ctx.steps[-1].name == "enrich" and ctx.steps[-1].strategy == "graph"


def test_enrich_finds_the_entities_named_in_the_question(store: Store, graph_collection: str) -> None:
    store.add_relations(graph_collection, CHAIN)
    ctx = new("Does the storage service need PostgreSQL?", store=store, collections=graph_collection).enrich()
    assert ctx.graph_context is not None
    assert "Storage Service --runs on--> PostgreSQL" in ctx.graph_context
    assert ctx.steps[-1].strategy == "graph:mentioned"


def test_enrich_with_nothing_found_is_skipped(store: Store, graph_collection: str) -> None:
    ctx = new("Unrelated question here", store=store, collections=graph_collection).enrich()
    assert ctx.graph_context is None and ctx.steps[-1].skipped


async def test_enrich_async_twin(store: Store, graph_collection: str) -> None:
    store.add_relations(graph_collection, CHAIN)
    ctx = await aenrich(new("q", store=store, collections=graph_collection), entity="backup job")
    assert ctx.graph_context and "Backup Job --alerts--> Lumen Sync" in ctx.graph_context
    assert enrich(new("q", store=store, collections=graph_collection), entity="backup job") == ctx


def test_enrich_degrades_when_the_graph_cannot_be_read(store: Store, graph_collection: str) -> None:
    from sqlalchemy import text

    ctx = new("q", store=store, collections=graph_collection)
    with store.engine.begin() as conn:  # the table goes missing (restored below)
        conn.execute(text("ALTER TABLE agentrag.relations RENAME TO relations_hidden"))
    try:
        ctx = ctx.enrich(entity="Lumen Sync")
    finally:
        with store.engine.begin() as conn:
            conn.execute(text("ALTER TABLE agentrag.relations_hidden RENAME TO relations"))
    assert ctx.ok and ctx.graph_context is None
    assert [d.kind for d in ctx.degradations] == ["graph-unavailable"]


# ---- files and CLI ------------------------------------------------------------------------------
def test_read_triples_csv_and_jsonl(tmp_path: Path) -> None:
    csv_file = tmp_path / "t.csv"
    csv_file.write_text("subject,relation,object,source\nA,b,C,x.md\nD,e,F,\n", encoding="utf-8")
    assert read_triples(csv_file) == [
        {"subject": "A", "relation": "b", "object": "C", "source": "x.md"},
        {"subject": "D", "relation": "e", "object": "F"},
    ]
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"subject": "A", "relation": "b", "object": "C"}\n\n', encoding="utf-8")
    assert read_triples(jsonl) == [{"subject": "A", "relation": "b", "object": "C"}]
    bad = tmp_path / "t.csv"
    bad.write_text("subject,object\nA,C\n", encoding="utf-8")
    with pytest.raises(InvalidInputError):
        read_triples(bad)
    with pytest.raises(InvalidInputError):
        read_triples(tmp_path / "t.txt")


@pytest.fixture
def cli_store(store: Store, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setattr(cli.common, "open_store", lambda args: store)
    return store


def test_cli_relations_add_import_list(
    cli_store: Store, graph_collection: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        cli.main(
            ["relations", "add", "--collection", graph_collection, "Lumen Sync", "depends on", "Storage"]
        )
        == 0
    )
    assert "added Lumen Sync --depends on--> Storage" in capsys.readouterr().out
    assert cli.main(["relations", "add", "-c", graph_collection, "Lumen Sync", "depends on", "Storage"]) == 0
    assert "already present" in capsys.readouterr().out

    csv_file = tmp_path / "rels.csv"
    csv_file.write_text(
        "subject,relation,object\nStorage,runs on,PostgreSQL\nLumen Sync,depends on,Storage\n"
    )
    assert (
        cli.main(["relations", "import", "-c", graph_collection, str(csv_file), "--source", "arch.md"]) == 0
    )
    assert "1 new relations (2 read, 1 already present)" in capsys.readouterr().out
    jsonl = tmp_path / "rels.jsonl"
    jsonl.write_text(json.dumps({"subject": "PostgreSQL", "relation": "stores", "object": "Notes"}) + "\n")
    assert cli.main(["relations", "import", "-c", graph_collection, str(jsonl), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"read": 1, "added": 1}

    assert cli.main(["relations", "list", "-c", graph_collection, "--json"]) == 0
    rows: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    assert [(r["subject"], r["object"]) for r in rows] == [
        ("Lumen Sync", "Storage"),
        ("Storage", "PostgreSQL"),
        ("PostgreSQL", "Notes"),
    ]
    assert rows[1]["source"] == "arch.md"
    assert cli.main(["relations", "list", "-c", graph_collection, "--entity", "storage"]) == 0
    out = capsys.readouterr().out
    assert "Lumen Sync --depends on--> Storage" in out and "Notes" not in out
    assert cli.main(["relations", "list", "-c", graph_collection, "--entity", "storage", "--depth", "2"]) == 0
    assert "PostgreSQL --stores--> Notes" in capsys.readouterr().out


# ---- tenant-rooted scopes (issue #14) -------------------------------------------------------------
A, B = Scope(tenant="acme"), Scope(tenant="globex")


@pytest.fixture
def scoped_graph(store: Store) -> str:
    name = f"gs_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, description="scoped graph test", scoped=True)
    return name


def _pairs(rows: list[Relation]) -> set[tuple[str, str]]:
    return {(r.subject, r.object) for r in rows}


def test_scoped_triples_are_recorded_and_read_only_in_their_tenant(store: Store, scoped_graph: str) -> None:
    assert store.add_relations(scoped_graph, [("X", "uses", "Y")], scope=A) == 1
    # the same triple in another tenant is another row, and a repeat in either is a no-op
    assert store.add_relations(scoped_graph, [("X", "uses", "Y"), ("X", "leaks", "Secret")], scope=B) == 2
    assert store.add_relations(scoped_graph, [("X", "uses", "Y")], scope=A) == 0
    mine = store.relations(scoped_graph, scope=A)
    assert _pairs(mine) == {("X", "Y")} and {r.tenant for r in mine} == {"acme"}
    assert _pairs(store.relations(scoped_graph, entity="x", scope=A)) == {("X", "Y")}
    assert store.relations(scoped_graph, relation="leaks", scope=A) == []
    assert _pairs(store.relations(scoped_graph, scope=B)) == {("X", "Y"), ("X", "Secret")}
    assert len(store.relations(scoped_graph, scope=Scope.every())) == 3
    assert store.relations(scoped_graph, scope=Scope(tenant="initech")) == []
    # a scoped collection refuses reads without a tenant, as search does
    for bad in (None, Scope(), Scope(workspace="shared"), Scope(session="s1")):
        with pytest.raises(ScopeError):
            store.relations(scoped_graph, scope=bad)
        with pytest.raises(ScopeError):
            store.neighbourhood(scoped_graph, "X", 2, scope=bad)


def test_writes_need_a_tenant_rooted_scope(store: Store, scoped_graph: str) -> None:
    for bad in (Scope.every(), Scope(workspace="shared"), Scope(session="s1")):
        with pytest.raises(ScopeError):
            store.add_relations(scoped_graph, [("X", "uses", "Y")], scope=bad)
    with pytest.raises(ScopeError):
        store.add_relations(scoped_graph, [("X", "uses", "Y")], scope=Scope(tenant="a\x00b"))
    assert store.relations(scoped_graph, scope=Scope.every()) == []  # nothing half-written


def test_workspace_and_session_narrow_within_the_tenant(store: Store, scoped_graph: str) -> None:
    store.add_relations(scoped_graph, [("X", "in", "W1")], scope=Scope(tenant="acme", workspace="w1"))
    store.add_relations(scoped_graph, [("X", "in", "W2")], scope=Scope(tenant="acme", workspace="w2"))
    store.add_relations(scoped_graph, [("X", "in", "S1")], scope=Scope(tenant="acme", session="s1"))
    store.add_relations(scoped_graph, [("X", "in", "Other W1")], scope=Scope(tenant="globex", workspace="w1"))
    assert _pairs(store.relations(scoped_graph, scope=Scope(tenant="acme", workspace="w1"))) == {("X", "W1")}
    assert _pairs(store.relations(scoped_graph, scope=Scope(tenant="acme", session="s1"))) == {("X", "S1")}
    assert _pairs(store.relations(scoped_graph, scope=A)) == {("X", "W1"), ("X", "W2"), ("X", "S1")}
    (row,) = store.relations(scoped_graph, scope=Scope(tenant="globex", workspace="w1"))
    assert (row.tenant, row.workspace, row.session) == ("globex", "w1", None)


def test_neighbourhood_never_walks_through_another_tenants_triples(store: Store, scoped_graph: str) -> None:
    # acme: X -> Y and Q -> R; globex holds the only bridge Y -> Q and a tail R -> Z
    store.add_relations(scoped_graph, [("X", "calls", "Y"), ("Q", "calls", "R")], scope=A)
    store.add_relations(scoped_graph, [("Y", "calls", "Q"), ("R", "calls", "Z")], scope=B)
    assert _pairs(store.neighbourhood(scoped_graph, "x", 5, scope=A)) == {("X", "Y")}
    # in globex, R -> Z is reachable from Q only through acme's Q -> R: not reached
    assert _pairs(store.neighbourhood(scoped_graph, "Q", 5, scope=B)) == {("Y", "Q")}
    assert _pairs(store.neighbourhood(scoped_graph, "R", 5, scope=B)) == {("R", "Z")}
    # across every scope the bridge joins the whole chain
    every = store.neighbourhood(scoped_graph, "X", 5, scope=Scope.every())
    assert _pairs(every) == {("X", "Y"), ("Y", "Q"), ("Q", "R"), ("R", "Z")}
    assert [r.hop for r in every] == [1, 2, 3, 4]


def test_enrich_reads_the_graph_in_the_contexts_scope(store: Store, scoped_graph: str) -> None:
    store.add_relations(scoped_graph, [("Lumen Sync", "depends on", "Storage Service")], scope=A)
    store.add_relations(scoped_graph, [("Storage Service", "leaks", "Globex Secret")], scope=B)
    store.add_relations(scoped_graph, [("Globex Billing", "owns", "Lumen Sync")], scope=B)
    ctx = new("Is Lumen Sync slow?", store=store, collections=scoped_graph, scope=A).enrich(depth=3)
    assert ctx.graph_context is not None
    assert ctx.graph_context.splitlines()[0].endswith("Lumen Sync --depends on--> Storage Service")
    assert "Globex" not in ctx.graph_context and len(ctx.graph_context.splitlines()) == 1
    # the entities named in the question come from the tenant's own triples only
    asked = new("What does Globex Billing own?", store=store, collections=scoped_graph, scope=A).enrich()
    assert asked.graph_context is None and asked.steps[-1].skipped
    theirs = new("What does Globex Billing own?", store=store, collections=scoped_graph, scope=B).enrich(
        depth=2
    )
    assert theirs.graph_context and "Globex Billing --owns--> Lumen Sync" in theirs.graph_context
    assert "depends on" not in theirs.graph_context  # Lumen Sync's acme edge, one hop further
    with pytest.raises(ScopeError):
        new("Is Lumen Sync slow?", store=store, collections=scoped_graph).enrich(entity="Lumen Sync")


def test_unscoped_rows_are_seen_only_without_a_tenant(store: Store, graph_collection: str) -> None:
    """On an unscoped collection: None / Scope() and Scope.every() read every row; a tenant scope
    reads only that tenant's rows (unscoped rows never match it, as for documents)."""
    assert store.add_relations(graph_collection, [("X", "uses", "Y")]) == 1
    assert store.add_relations(graph_collection, [("X", "uses", "Y")]) == 0  # NULL scope: still a no-op
    assert store.add_relations(graph_collection, [("X", "uses", "Y"), ("Y", "uses", "Z")], scope=A) == 2
    assert len(store.relations(graph_collection)) == 3
    assert len(store.relations(graph_collection, scope=Scope())) == 3
    assert len(store.relations(graph_collection, scope=Scope.every())) == 3
    mine = store.relations(graph_collection, scope=A)
    assert len(mine) == 2 and {r.tenant for r in mine} == {"acme"}
    assert store.relations(graph_collection, scope=B) == []
    assert [r.tenant for r in store.neighbourhood(graph_collection, "X", 1)] == [None, "acme"]


def test_cli_relations_scope_options(
    cli_store: Store, scoped_graph: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["relations", "add", "-c", scoped_graph, "X", "uses", "Y", "--tenant", "acme"]) == 0
    assert cli.main(["relations", "add", "-c", scoped_graph, "X", "leaks", "S", "--tenant", "globex"]) == 0
    capsys.readouterr()
    assert cli.main(["relations", "list", "-c", scoped_graph, "--tenant", "acme", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["object"], r["tenant"]) for r in rows] == [("Y", "acme")]
    assert cli.main(["relations", "list", "-c", scoped_graph, "--every-scope", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2
    assert cli.main(["relations", "list", "-c", scoped_graph]) != 0  # refused: no tenant
    assert "scoped" in capsys.readouterr().err
    assert cli.main(["relations", "list", "-c", scoped_graph, "--every-scope", "--tenant", "acme"]) != 0


# ---- property: no scope returns another tenant's triple --------------------------------------------
_ENTITIES = ["a", "b", "c", "d", "e"]
_SCOPES = [
    None,
    ("acme", None, None),
    ("acme", "w1", None),
    ("acme", None, "s1"),
    ("globex", None, None),
    ("globex", "w1", None),
]
_row_st = st.tuples(st.sampled_from(_ENTITIES), st.sampled_from(_ENTITIES), st.sampled_from(_SCOPES))
_query_st = st.sampled_from([*_SCOPES[1:], ("initech", None, None)])


def _matches(row: tuple[str | None, str | None, str | None] | None, want: tuple[str, ...]) -> bool:
    have = row or (None, None, None)
    return all(w is None or h == w for h, w in zip(have, want, strict=True))


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(_row_st, max_size=12), query=_query_st, entity=st.sampled_from(_ENTITIES),
       depth=st.integers(1, 4))  # fmt: skip
def test_no_scope_returns_another_tenants_triple(
    store: Store, scoped_graph: str, rows: list[Any], query: tuple[Any, ...], entity: str, depth: int
) -> None:
    from sqlalchemy import text

    with store.engine.begin() as conn:
        conn.execute(
            text("DELETE FROM agentrag.relations WHERE collection_id = :c"),
            {"c": store.collection(scoped_graph).id},
        )
    stored: dict[tuple[str, str, Any], None] = {}
    for subject, obj, scope in rows:
        stored[(subject, obj, scope)] = None
        store.add_relations(scoped_graph, [(subject, "to", obj)], scope=Scope(*scope) if scope else None)
    scope = Scope(*query)
    listed = store.relations(scoped_graph, scope=scope)
    walked = store.neighbourhood(scoped_graph, entity, depth, scope=scope)
    for r in [*listed, *walked]:
        assert r.tenant == scope.tenant and _matches((r.tenant, r.workspace, r.session), query)
    # the listing is exactly the rows in scope, and the walk equals a walk over them alone
    visible = [(s, o) for s, o, sc in stored if sc is not None and _matches(sc, query)]
    assert sorted((r.subject, r.object) for r in listed) == sorted(visible)
    reached = {entity: 0}
    for hop in range(1, depth):
        for s, o in visible:
            for here, there in ((s, o), (o, s)):
                if reached.get(here) == hop - 1 and there not in reached:
                    reached[there] = hop
    expected = {}
    for s, o in visible:
        hops = [reached[e] + 1 for e in (s, o) if e in reached]
        if hops:
            expected[(s, o)] = min(hops)
    assert {(r.subject, r.object): r.hop for r in walked} == expected
