"""The terms of a question in another language, read in that language (issue #40): a German compound or
a Greek form the stemmer leaves apart is held loosely; English and the bigram languages read none of it."""

from __future__ import annotations

import pytest

from agentrag.abstain import found_share
from agentrag.answer_languages import answering_in, loosely_held
from agentrag.answer_types import answer_type
from agentrag.evidence import units_of
from agentrag.extractive import gather
from agentrag.focus import focus
from tests.test_evidence import hit

DE_FLEET = [
    hit("# Fuhrpark\n\nDie Dienstwagen der Firma werden alle vier Jahre ersetzt.\n", "chk_d1"),
    hit("# Kantine\n\nDie Kantine im Erdgeschoss öffnet werktags um halb zwölf.\n", "chk_d2"),
]


def _de(question: str) -> tuple[float, float, float]:
    """``(covered, unknown, found)`` of a German question over :data:`DE_FLEET`."""
    with answering_in("de"):
        answer = gather([question], DE_FLEET)
        covered, unknown = focus(question, answer.ranked[0][0].unit, units_of(DE_FLEET))
        return covered, unknown, found_share(question, [h.text for h in DE_FLEET])


def test_a_german_compound_is_held_by_the_word_it_is_built_on() -> None:
    # "Dienstwagenflotte" is written nowhere, "Dienstwagen" is: before, the compound counted as a
    # term no unit holds (unknown 0.5) and the question's evidence as half missing
    covered, unknown, found = _de("Wann wurde die Dienstwagenflotte ersetzt?")
    assert unknown == 0.0
    assert covered == 1.0 and found == 1.0


def test_a_word_the_documents_lack_stays_unknown() -> None:
    # interns' bicycles: neither word begins or ends one the units write
    _, unknown, found = _de("Wann wurden die Fahrräder der Praktikanten ersetzt?")
    assert unknown > 0.5 and found < 0.5


@pytest.mark.parametrize(
    ("language", "present", "term", "held"),
    [
        ("de", {"eisenbahn"}, "eisenbahnstreck", True),  # a compound's first part
        ("de", {"strass"}, "landstrass", True),  # its head
        ("de", {"ostanatoli"}, "anatoli", True),  # the question's word inside a longer one
        ("el", {"εξαπλ"}, "εξαπλωσ", True),  # a form the stemmer cut apart
        ("de", {"gehalt"}, "halt", False),  # too short to say
        ("de", {"prakt"}, "praktikant", True),
        ("de", {"praktikum"}, "praktikant", False),  # a shared start is not enough
        (None, {"notebook"}, "notebooks", False),  # English: exactly as before
        ("zh", {"年假"}, "年假期", False),  # bigrams: exactly as before
    ],
)
def test_loosely_held(language: str | None, present: set[str], term: str, held: bool) -> None:
    with answering_in(language):
        assert loosely_held(present, term) is held


@pytest.mark.parametrize(
    ("language", "question", "kind"),
    [
        ("de", "Wie viele Stellplätze hat die Tiefgarage?", "number"),
        ("de", "Wann öffnet die Kantine?", "time"),
        ("tr", "Toplantıya kaç kişi katıldı?", "number"),
        ("tr", "Kantin ne zaman açılır?", "time"),
        ("tr", "Kaçak yolcu nerede yakalandı?", None),  # "kaçak" (a fugitive) asks for no number
        ("es", "¿Cuántos días de vacaciones hay?", "number"),
        ("ru", "Когда открывается столовая?", "time"),
        ("zh", "员工每年有多少天年假？", "number"),
        ("ja", "食堂はいつ開きますか？", "time"),
        ("ja", "食堂はいつも混んでいますか？", None),  # "always", not "when"
        ("hi", "कितने दिन की छुट्टी मिलती है?", "number"),
        ("de", "Wer leitet die Kantine?", None),  # no cue in the language: the types step aside
        ("fi", "Kuinka monta päivää?", None),  # a language without cues
    ],
)
def test_the_kind_asked_for_in_the_language(language: str, question: str, kind: str | None) -> None:
    with answering_in(language):
        assert answer_type(question) == kind


def test_english_questions_read_the_english_cues_only() -> None:
    assert answer_type("How many parking spaces are there?") == "number"
    assert answer_type("Wie viele Stellplätze hat die Tiefgarage?") is None


def test_a_number_asked_for_in_german_is_missed_by_a_unit_without_one() -> None:
    # "how many" over a unit that states no number: the mismatch lowers the confidence (before, the
    # cue was English only and a German question's kind was never checked)
    hits = [hit("# Parken\n\nDie Tiefgarage liegt unter dem Hauptgebäude.\n", "chk_p1")]
    with answering_in("de"):
        counted = gather(["Wie viele Stellplätze hat die Tiefgarage?"], hits)
        located = gather(["Wo liegt die Tiefgarage genau?"], hits)
    assert counted.signals.mismatch == 1.0
    assert located.signals.mismatch == 0.0
