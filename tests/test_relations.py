"""Knowledge-graph relations: the store API, the neighbourhood walk, enrich() and the CLI."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentrag import cli
from agentrag.errors import CollectionNotFoundError, InvalidInputError
from agentrag.steps import aenrich, enrich, new
from agentrag.store.relations import format_triples, read_triples
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
    monkeypatch.setattr(cli, "_store", lambda args: store)
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
