"""The citation check covers every line of an answer (issue #37 item 5, F-4): a heading, a list
item and a table row (its header line included, unless it only names columns) are claims like
sentences, so an uncited one is ungrounded and ``suppress_ungrounded`` removes it."""

from __future__ import annotations

import pytest

from agentrag.grounding import check_citations, table_header_needs_citation
from agentrag.store.store import Store
from agentrag.testing import FakeLLM
from tests.test_answer import first_ids, searched

VALID = {"chk_aaa111", "chk_bbb222"}
FACT = "Refunds take 30 days [chk_aaa111]."


@pytest.mark.parametrize(
    ("hostile", "answer"),
    [
        ("# Wire money to account 99-1234 now", "# Wire money to account 99-1234 now\n" + FACT),
        ("### Call +1 555 0100 to confirm", FACT + "\n\n### Call +1 555 0100 to confirm"),
        ("- Wire money to account 99-1234 now", FACT + "\n- Wire money to account 99-1234 now"),
        (
            "| Wire money to account 99-1234 now |",
            "| Wire money to account 99-1234 now |\n|---|\n| Refunds take 30 days [chk_aaa111] |",
        ),
        (
            "| Plan | Account 99-1234 |",
            "| Plan | Account 99-1234 |\n|---|---|\n| Pro | 30 days [chk_aaa111] |",
        ),
        (
            "| Pro | wire money to 99-1234 |",
            "| Plan | Note |\n|---|---|\n| Pro | wire money to 99-1234 |\n" + FACT,
        ),
    ],
)
def test_an_uncited_line_of_any_kind_is_ungrounded_and_suppressed(hostile: str, answer: str) -> None:
    check = check_citations(answer, VALID)
    assert check.ungrounded == (hostile,) and not check.grounded
    assert hostile not in check.suppressed_text and "chk_aaa111" in check.suppressed_text


def test_a_cited_heading_is_grounded() -> None:
    check = check_citations("## Refunds take 30 days [chk_aaa111]\nShipping is free [chk_bbb222].", VALID)
    assert check.grounded and check.ungrounded == ()


def test_a_header_line_that_only_names_its_columns_needs_no_citation() -> None:
    table = "| Plan | Requests per minute |\n|---|---|\n| Pro | 600 [chk_aaa111] |"
    check = check_citations(table, VALID)
    assert check.grounded and check.ungrounded == ()
    assert not table_header_needs_citation("| Plan | Requests per minute |")
    assert table_header_needs_citation("| Plan | Requests in 2024 |")  # a number is a fact
    assert table_header_needs_citation("| Send your password to the admin right now |")  # a sentence
    assert table_header_needs_citation("| See https://evil.example |")


def test_suppress_ungrounded_removes_a_hostile_heading(store: Store, support: str) -> None:
    ids = first_ids(store, support)
    reply = f"# Wire money to account 99-1234 now\n\nDeleted notes go to the trash [{ids[0]}]."
    ctx = searched(store, support, FakeLLM([reply])).answer(suppress_ungrounded=True)
    assert ctx.answer_text == f"Deleted notes go to the trash [{ids[0]}]."
    assert ctx.ungrounded_claims == ("# Wire money to account 99-1234 now",) and ctx.grounded is False
