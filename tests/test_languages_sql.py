"""``lexical_sql`` in every language (issue #40 item 2): a tsvector configuration per language where
PostgreSQL has one, ``simple`` over our own segmentation where it has none; English as before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from agentrag.retrieval.text_search import sql_configs, tsquery_parts, tsquery_text
from tests.test_languages import CHINESE, GERMAN, _ingest

THAI = {
    "dog.txt": "สุนัขนอนหลับอยู่ในสวนหลังบ้าน",
    "market.txt": "ตลาดหุ้นปิดตัวสูงขึ้นในวันนี้",
}
ENGLISH = {
    "defense.txt": "The defense of the Panthers gave up just 308 points, ranking sixth in the league.",
    "stadium.txt": "The game was played at Levi's Stadium in Santa Clara, California.",
}


def _sql_search(store, name: str, query: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [h.source for h in store.search(query, collections=name, mode="lexical_sql", top_k=3)]


def test_a_german_collection_is_stemmed_by_postgresqls_german_configuration(
    store, collection_name: str
) -> None:  # type: ignore[no-untyped-def]
    store.create_collection(collection_name, language="de")
    _ingest(store, collection_name, GERMAN)
    # "Verteidigungen" is in no chunk: the German stemmer (not the English one) makes it "verteid"
    assert _sql_search(store, collection_name, "Verteidigungen") == ["verteidigung.txt"]
    with store.engine.connect() as conn:
        languages = conn.execute(
            text("SELECT tsv_languages FROM agentrag.collections WHERE name = :n"), {"n": collection_name}
        ).scalar()
    assert languages == ["de"]


def test_a_chinese_collection_is_found_through_bigrams(store, collection_name: str) -> None:  # type: ignore[no-untyped-def]
    store.create_collection(collection_name, language="zh")
    _ingest(store, collection_name, CHINESE)
    assert _sql_search(store, collection_name, "比赛在哪个体育场举行？")[0] == "stadium.txt"
    assert _sql_search(store, collection_name, "黑豹队的防守")[0] == "defense.txt"


def test_thai_keeps_its_vowel_marks_at_both_ends(store, collection_name: str) -> None:  # type: ignore[no-untyped-def]
    store.create_collection(collection_name, language="th")
    _ingest(store, collection_name, THAI)
    assert _sql_search(store, collection_name, "สุนัขนอนที่ไหน")[0] == "dog.txt"


def test_a_mixed_collection_analyses_each_chunk_in_its_language(store, collection_name: str) -> None:  # type: ignore[no-untyped-def]
    store.create_collection(collection_name)
    _ingest(store, collection_name, {**GERMAN, **CHINESE, "en.txt": "The defense of the Panthers ran well."})
    for query, source in (
        ("Verteidigungen", "verteidigung.txt"),
        ("体育场", "stadium.txt"),
        ("defenses", "en.txt"),
    ):
        assert _sql_search(store, collection_name, query)[:1] == [source], query


def test_english_tsvectors_are_postgresqls_english_ones(store, collection_name: str) -> None:  # type: ignore[no-untyped-def]
    store.create_collection(collection_name, language="en")
    _ingest(store, collection_name, ENGLISH)
    assert _sql_search(store, collection_name, "defenses ranked")[0] == "defense.txt"
    with store.engine.connect() as conn:
        differ = conn.execute(
            text(
                "SELECT count(*) FILTER (WHERE t.tsv IS DISTINCT FROM to_tsvector('english', c.text)),"
                " count(*)"
                " FROM agentrag.chunk_tsv t JOIN agentrag.chunks c ON c.id = t.chunk_id"
                " JOIN agentrag.collections col ON col.id = c.collection_id WHERE col.name = :n"
            ),
            {"n": collection_name},
        ).one()
    assert differ[0] == 0 and differ[1] >= 2


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_an_english_query_is_the_tsquery_of_before(query: str) -> None:
    configs = sql_configs(["english", "german", "simple"])
    expected = [("english", tsquery_text(query))] if tsquery_text(query) else []
    assert tsquery_parts(query, ["en"], configs) == expected
    assert tsquery_parts(query, [None], configs) == expected


_OPERATORS = set("&|!():*<>'\\")


@settings(max_examples=300, deadline=None)
@given(st.text(), st.sampled_from(["de", "zh", "th", "hi", "vi", "cs"]))
def test_no_tsquery_operator_reaches_the_parser_in_any_language(query: str, language: str) -> None:
    for config, source in tsquery_parts(query, [language], sql_configs(["german", "hindi"])):
        assert config in {"german", "hindi", "simple"}
        terms = source.split(" | ")
        assert all(
            term and not (set(term) & _OPERATORS) and not any(ch.isspace() for ch in term) for term in terms
        )
