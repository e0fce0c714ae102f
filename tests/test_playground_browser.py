"""The playground and ``/docs`` in a real browser (Debian's Chromium, headless) against a real
``agentrag serve``: nothing the pages load or send leaves 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser_support import Browser
from tests.interfaces_support import make_corpus
from tests.server_support import Server, token


@pytest.fixture(scope="module")
def corpus(store: Any) -> dict[str, Any]:
    return make_corpus(store, "web")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    b = Browser(tmp_path / "profile")
    yield b
    b.close()


def assert_local(browser: Browser, server: Server) -> None:
    assert browser.requests, "the page made no request at all"
    outside = [
        u for u in browser.requests if not u.startswith((server.url + "/", "data:", "blob:", "about:"))
    ]
    assert outside == [], f"requests left 127.0.0.1: {outside}"


def connect(browser: Browser, server: Server, tenant: str, collection: str) -> None:
    browser.navigate(server.url + "/")
    browser.evaluate(f"document.getElementById('token').value = {json.dumps(token(tenant))}")
    browser.evaluate("document.getElementById('connect').click()")
    browser.wait_for("document.querySelectorAll('#collections input').length > 0")
    browser.evaluate(f"document.querySelector('#collections input[value={json.dumps(collection)}]').click()")


def ask(browser: Browser, question: str) -> None:
    browser.evaluate(f"document.getElementById('question').value = {json.dumps(question)}")
    browser.evaluate("document.getElementById('ask').click()")
    browser.wait_for("document.getElementById('status').textContent === 'Done.'", timeout=60)


def test_ask_streams_an_answer_with_highlighted_support(
    browser: Browser, server: Server, corpus: dict[str, Any]
) -> None:
    connect(browser, server, corpus["a"], corpus["collection"])
    ask(browser, "How do I reset two-factor authentication?")
    answer = browser.evaluate("document.getElementById('answer').textContent")
    assert "[1]" in answer and "chk_" not in answer
    # the page renders each streamed delta as it arrives (counted by the page itself: under load the browser
    # may hand several deltas to one read, so DOM-mutation callbacks would coalesce them)
    pieces = browser.evaluate("document.getElementById('answer').dataset.pieces || '0'")
    assert int(pieces) >= 2, "the answer arrived in pieces (the text, then its sources)"
    marks = browser.evaluate("Array.from(document.querySelectorAll('mark.support')).map(m => m.textContent)")
    sentences = browser.evaluate("document.querySelectorAll('#answer .sentence').length")
    assert marks and sentences >= 1 and all(m.strip() for m in marks)
    # a sentence in focus highlights its supporting span in the source chunk
    browser.evaluate("document.querySelector('#answer .sentence').focus()")
    assert browser.wait_for("document.querySelectorAll('mark.support.active').length > 0")
    assert "first token" in browser.evaluate("document.getElementById('timings').textContent")
    proof = json.loads(browser.evaluate("document.getElementById('proof').textContent"))
    assert proof["tenant_id"] == corpus["a"] and proof["generation"]["grounded"] is True
    assert browser.evaluate("document.getElementById('notice').hidden") is True
    browser.screenshot("playground-answer.png")
    # a follow-up keeps the conversation
    ask(browser, "How long does it take?")
    assert "searched for:" in browser.evaluate("document.getElementById('timings').textContent")
    assert_local(browser, server)


def test_an_empty_result_is_explained(browser: Browser, server: Server, corpus: dict[str, Any]) -> None:
    connect(browser, server, corpus["a"], corpus["collection"])
    browser.evaluate("document.getElementById('classification').value = 'no-such-class'")
    ask(browser, "How do I reset two-factor authentication?")
    notice = browser.evaluate("document.getElementById('notice').textContent")
    assert browser.evaluate("document.getElementById('notice').hidden") is False
    assert "Nothing was retrieved" in notice and "filters" in notice
    assert browser.evaluate("document.querySelectorAll('#chunks li').length") == 0
    browser.screenshot("playground-empty.png")
    assert_local(browser, server)


def test_search_only_and_a_refused_token(browser: Browser, server: Server, corpus: dict[str, Any]) -> None:
    connect(browser, server, corpus["a"], corpus["collection"])
    browser.evaluate("document.getElementById('question').value = 'two-factor authentication reset'")
    browser.evaluate("document.getElementById('search').click()")
    browser.wait_for("document.querySelectorAll('#chunks li').length > 0")
    browser.evaluate("document.getElementById('token').value = 'not-a-token'")
    browser.evaluate("document.getElementById('ask').click()")
    status = browser.wait_for(
        "document.getElementById('status').className === 'error'"
        " && document.getElementById('status').textContent"
    )
    assert status.startswith("401")
    assert_local(browser, server)


def test_an_out_of_domain_question_abstains(browser: Browser, server: Server, corpus: dict[str, Any]) -> None:
    connect(browser, server, corpus["a"], corpus["collection"])
    ask(browser, "What is the boiling point of mercury on Jupiter?")
    browser.screenshot("playground-abstained.png")
    assert browser.evaluate("document.getElementById('notice').className") == "abstained"
    assert "abstained" in browser.evaluate("document.getElementById('notice').textContent")
    assert browser.evaluate("document.querySelectorAll('mark.support').length") == 0
    assert "confidence 0." in browser.evaluate("document.getElementById('timings').textContent")
    assert_local(browser, server)


def test_docs_render_offline_with_the_bearer_scheme(browser: Browser, server: Server) -> None:
    browser.navigate(server.url + "/docs")
    title = browser.wait_for("(document.querySelector('.swagger-ui .info .title') || {}).textContent")
    assert title.startswith("agentrag")
    assert browser.wait_for("document.querySelector('.swagger-ui .btn.authorize') !== null")
    assert browser.wait_for("document.querySelectorAll('.opblock').length >= 5")
    browser.screenshot("docs.png")
    assert_local(browser, server)


def test_the_pages_are_static_and_locked_to_this_origin(client: Any) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "playground.js" in page.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "connect-src 'self'" in policy and "http" not in policy
    script = client.get("/playground/playground.js")
    assert script.status_code == 200 and "innerHTML" not in script.text
    assert client.get("/playground.json").json()["tenant_claim"] == "tenant_id"
    for asset in ("/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css"):
        assert client.get(asset).status_code == 200, asset
    assert "cdn" not in client.get("/docs").text.lower()
