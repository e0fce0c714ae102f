"""A principal's grant tokens bound as one ``text[]`` literal (predicate.TextArray), and the grant each hit
names (predicate.grant_of): invariants over arbitrary names."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from agentrag.retrieval.predicate import TextArray, compile_predicate, grant_of
from agentrag.retrieval.scoped import grant_tokens
from agentrag.scope import Principal, Scope, grant_text
from agentrag.store.store import Store

# any text PostgreSQL stores: no NUL; quotes, backslashes, braces, commas, spaces and NULL-like words included
NAMES = st.text(
    st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), min_size=1, max_size=12
).filter(lambda s: s.strip() != "")
TRICKY = st.sampled_from(['a"b', "a\\b", "{x}", "a,b", " lead", "NULL", "null", "é", "\\", '"', '\\"', "a b"])


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.one_of(NAMES, TRICKY), max_size=30))
def test_a_text_array_literal_reads_back_as_its_items(store: Store, items: list[str]) -> None:
    literal = TextArray(items)
    assert literal.items == tuple(items)
    with store.engine.connect() as conn:
        read = conn.execute(text("SELECT CAST(:p AS text[])"), {"p": literal}).scalar()
        overlap = conn.execute(
            text("SELECT CAST(:g AS text[]) && CAST(:p AS text[])"), {"g": items[:1] or ["-"], "p": literal}
        ).scalar()
    assert read == items
    assert overlap is bool(items)


def test_the_planner_counts_a_literal_s_tokens() -> None:
    principal = Principal(user="ann", groups=[f"g{i}" for i in range(300)])
    predicate = compile_predicate(Scope(principal=principal))
    where = predicate.where(acl=True)
    assert isinstance(predicate.params["p_tokens"], TextArray)
    assert grant_tokens(where, predicate.params) == 302  # everyone, the user, 300 groups
    assert grant_tokens("TRUE", predicate.params) == 0


def _first_held(grants: list[str], principal: Principal) -> str | None:
    """The rule: the principal's user, then its groups in name order, then everyone."""
    order = [*([f"u:{principal.user}"] if principal.user else []), *(f"g:{g}" for g in principal.groups), "*"]
    held = set(grants)
    return next((grant_text(t) for t in order if t in held), "admin" if principal.admin else None)


@settings(max_examples=200, deadline=None)
@given(
    user=st.one_of(st.none(), st.sampled_from(["ann", "bob", "g1"])),
    groups=st.lists(st.sampled_from(["g1", "g2", "hr", "ops", "u:ann", "zz"]), max_size=4),
    admin=st.booleans(),
    grants=st.lists(
        st.sampled_from(["*", "u:ann", "u:bob", "g:g1", "g:g2", "g:hr", "g:u:ann", "g:zz", "g:x"])
    ),
)
def test_a_hit_names_the_first_grant_the_principal_holds(
    user: str | None, groups: list[str], admin: bool, grants: list[str]
) -> None:
    if user is None and not groups and not admin:
        return
    principal = Principal(user=user, groups=groups, admin=admin)
    assert grant_of(grants, principal) == _first_held(grants, principal)
    assert grant_of(None, principal) is None
