"""Languages (issue #40): a collection's language, declared or detected per document and recorded;
lexical analysis per language, the same for chunks and queries; English exactly as before."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrag.errors import InvalidInputError, UnsupportedLanguageError
from agentrag.languages import LANGUAGES, analyze, check_language, detect, query_analyzer, ts_config
from agentrag.retrieval.tokenize import tokenize

GERMAN = {
    "verteidigung.txt": "Die Verteidigung der Panthers gab nur 308 Punkte ab und belegte den sechsten Platz.",
    "stadion.txt": "Das Spiel wurde im Levi's Stadium in Santa Clara in Kalifornien ausgetragen.",
}
CHINESE = {
    "defense.txt": "黑豹队的防守只丢了308分，在联盟中排名第六。",
    "stadium.txt": "比赛在加利福尼亚州圣克拉拉的李维斯体育场举行。",
}


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_english_and_no_language_are_the_english_tokenizer(text: str) -> None:
    assert analyze(text, None) == tokenize(text)
    assert analyze(text, "en") == tokenize(text)
    assert query_analyzer(["en"]) is tokenize
    assert query_analyzer([None]) is tokenize


def test_german_is_stemmed_with_its_snowball_stemmer() -> None:
    assert analyze("Verteidigungen der Mannschaften", "de") == ["verteid", "der", "mannschaft"]
    # the English stemmer would leave both words apart; the German one joins them
    assert analyze("Mannschaften", "de") == analyze("Mannschaft", "de")


def test_unspaced_scripts_are_cut_into_bigrams_and_other_words_kept() -> None:
    assert analyze("超级碗50", "zh") == ["超级", "级碗", "50"]
    assert analyze("李", "zh") == ["李"]
    assert analyze("NFL的赛季", "zh") == ["nfl", "的赛", "赛季"]
    assert analyze("スーパーボウル", "ja")[:2] == ["スー", "ーパ"]


def test_combining_marks_stay_inside_a_word() -> None:
    # Devanagari vowel signs are not \w: the English tokenizer cuts the word at each one
    assert analyze("फुटबॉल", "hi") == ["फुटबॉल"]
    assert tokenize("फुटबॉल") == ["टब"]  # one-letter pieces dropped: the word is lost


def test_a_mixed_index_analyses_the_query_in_each_language() -> None:
    tokens = query_analyzer(["de", "en"])("Mannschaften running")
    assert "mannschaft" in tokens and "run" in tokens


def test_check_language_normalises_and_refuses_unknown_codes() -> None:
    assert check_language("zh-CN") == "zh"
    assert check_language("DE") == "de"
    with pytest.raises(UnsupportedLanguageError, match="expected one of") as caught:
        check_language("xx")
    assert isinstance(caught.value, InvalidInputError)
    assert ts_config("de") == "german" and ts_config("zh") == "simple" and ts_config(None) == "english"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Wie viele Punkte gab die Verteidigung der Panthers ab?", "de"),
        ("黑豹队的防守丢了多少分？", "zh"),
        ("パンサーズの守備は何点を失いましたか？", "ja"),
        ("How many points did the defense give up?", "en"),
        ("Сколько очков пропустила защита?", "ru"),
    ],
)
def test_detect_short_texts(text: str, code: str) -> None:
    assert detect(text) == code
    assert code in LANGUAGES


def test_detect_falls_back_without_letters_or_on_a_few_ascii_words() -> None:
    assert detect("1234 -- 56", fallback=None) is None
    assert detect("refund policy") is None  # py3langid: German at 0.20
    assert detect("refund policy", fallback="en") == "en"


def _ingest(store, name: str, files: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    from agentrag.store.ingest import ingest_texts

    ingest_texts(store, [(source, text, {}) for source, text in files.items()], collection=name)


def test_create_collection_refuses_an_unknown_language(store, collection_name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UnsupportedLanguageError):
        store.create_collection(collection_name, language="klingon")
    assert collection_name not in {c.name for c in store.collections()}


def test_declared_language_is_recorded_shown_and_used(store, collection_name: str) -> None:  # type: ignore[no-untyped-def]
    created = store.create_collection(collection_name, language="de-DE")
    assert created.language == "de" and "de)" in repr(created) and created.to_dict()["language"] == "de"
    _ingest(store, collection_name, GERMAN)
    assert {d.language for d in store.documents(collection_name)} == {"de"}
    # "Verteidigungen" is in no chunk: only its German stem matches "Verteidigung"
    hits = store.search("Verteidigungen", collections=collection_name, mode="lexical", top_k=3)
    assert [h.source for h in hits] == ["verteidigung.txt"]


def test_chinese_query_finds_its_chunk_through_bigrams(store, collection_name: str) -> None:  # type: ignore[no-untyped-def]
    store.create_collection(collection_name, language="zh")
    _ingest(store, collection_name, CHINESE)
    hits = store.search("比赛在哪个体育场举行？", collections=collection_name, mode="lexical", top_k=3)
    assert hits and hits[0].source == "stadium.txt"


def test_detected_languages_of_a_mixed_collection(store, collection_name: str) -> None:  # type: ignore[no-untyped-def]
    created = store.create_collection(collection_name)
    assert created.language is None
    _ingest(store, collection_name, {**GERMAN, **CHINESE, "en.txt": "The defense of the Panthers ran well."})
    languages = {d.source: d.language for d in store.documents(collection_name)}
    assert languages == {
        "verteidigung.txt": "de",
        "stadion.txt": "de",
        "defense.txt": "zh",
        "stadium.txt": "zh",
        "en.txt": "en",
    }
    # each chunk in its own language: German stems, Chinese bigrams and English stems in one index
    for query, source in (
        ("Verteidigungen", "verteidigung.txt"),
        ("体育场", "stadium.txt"),
        ("defenses", "en.txt"),
    ):
        hits = store.search(query, collections=collection_name, mode="lexical", top_k=1)
        assert [h.source for h in hits] == [source], query


# ---- stop words of the BM25 leg (Snowball's lists) -----------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_english_is_the_english_tokenizer_with_or_without_stop_words(text: str) -> None:
    assert analyze(text, "en", stop_words=True) == tokenize(text)
    assert query_analyzer(["en"], stop_words=True) is tokenize


def test_the_bm25_leg_drops_a_languages_stop_words_before_stemming() -> None:
    assert analyze("Die Verteidigung der Panthers", "de", stop_words=True) == ["verteid", "panth"]
    assert analyze("Die Verteidigung der Panthers", "de") == ["die", "verteid", "der", "panth"]
    assert analyze("¿Cuántos puntos cedió la defensa?", "es", stop_words=True) == [
        "cuant",
        "punt",
        "ced",
        "defens",
    ]
    # no list for Chinese: every bigram stays
    assert analyze("比赛在哪", "zh", stop_words=True) == analyze("比赛在哪", "zh")
    tokens = query_analyzer(["de", "en"], stop_words=True)("die Mannschaften")
    assert "mannschaft" in tokens and "die" in tokens  # "die" is no English stop word


def test_every_stop_word_list_is_folded() -> None:
    from agentrag.retrieval.stopwords import STOP_WORD_LANGUAGES, stop_words

    assert set(LANGUAGES) >= STOP_WORD_LANGUAGES and "en" not in STOP_WORD_LANGUAGES
    for code in STOP_WORD_LANGUAGES:
        words = stop_words(code)
        assert len(words) >= 50 and all(w == w.lower() and w.strip() == w and w for w in words), code
    assert stop_words("zh") == frozenset()


def test_a_german_question_of_stop_words_finds_nothing_lexically(store, collection_name: str) -> None:  # type: ignore[no-untyped-def]
    store.create_collection(collection_name, language="de")
    _ingest(store, collection_name, GERMAN)
    assert list(store.search("und der die", collections=collection_name, mode="lexical", top_k=3)) == []
    hits = store.search("die Verteidigung", collections=collection_name, mode="lexical", top_k=3)
    assert [h.source for h in hits] == ["verteidigung.txt"]
