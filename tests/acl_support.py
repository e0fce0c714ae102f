"""Who may read what (issue #26), modelled in Python from the grants and sessions alone: the
property tests of every interface (library, CLI, /search, /ask, LangGraph) compare what they
return with this model. Random documents carry random grants and are shared or a session's
private upload; random principals ask from no session or one, with or without the shared ones."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

import agentrag as ar

USERS = ["u0", "u1", "u2"]
GROUPS = ["g0", "g1", "g2"]
SESSIONS = ["s1", "s2"]
# one marker word per document: its text, searched for in everything an interface returns
MARKERS = ["amberly", "basilisk", "cedarwood", "dunmore", "emberly", "fjordic"]
QUESTION = "What do the shared words documents say?"
TENANT = "t"

GRANT = st.sampled_from([*(f"user:{u}" for u in USERS), *(f"group:{g}" for g in GROUPS), "everyone"])
PRINCIPAL = st.builds(
    ar.Principal, user=st.sampled_from(USERS), groups=st.lists(st.sampled_from(GROUPS), max_size=2)
)
# (grants, the session it was uploaded in or None: shared)
DOCS = st.lists(
    st.tuples(st.sets(GRANT, max_size=3), st.sampled_from([None, *SESSIONS])), min_size=1, max_size=6
)
EDITS = st.lists(st.tuples(st.integers(0, 5), st.booleans(), GRANT), max_size=4)  # (doc, grant?, grant)


def may_read(grants: set[str], p: ar.Principal) -> bool:
    return "everyone" in grants or f"user:{p.user}" in grants or any(f"group:{g}" in grants for g in p.groups)


@dataclass
class Doc:
    source: str
    marker: str
    grants: set[str]
    session: str | None  # private to this session; None: shared in its tenant
    id: str = field(default="")

    @property
    def text(self) -> str:
        return f"shared words {self.marker} document"

    def visible(self, p: ar.Principal, session: str | None, include_shared: bool) -> bool:
        """Outside a session: the shared documents granted to ``p``. In a session: its own
        uploads, plus (``include_shared``) the shared documents granted to ``p``."""
        shared = self.session is None and may_read(self.grants, p)
        if session is None:
            return shared
        return self.session == session or (include_shared and shared)


def ingest(store: ar.Store, collection: str, drawn: list[tuple[set[str], str | None]]) -> list[Doc]:
    """The drawn documents in ``collection`` (acl=True), in tenant ``TENANT``, with their ids and a
    triple each."""
    docs = [Doc(f"d{n}.md", MARKERS[n], set(g), s) for n, (g, s) in enumerate(drawn)]
    for d in docs:
        report = store.ingest_text(
            d.text,
            collection=collection,
            source=d.source,
            tenant=TENANT,
            session=d.session,
            grants=sorted(d.grants),
        )
        d.id = report.document_ids[d.source]
        # a knowledge-graph triple from it, in its scope: as readable as the document
        store.add_relations(
            collection,
            [(d.marker, "appears in", "document", d.source)],
            scope=ar.Scope(tenant=TENANT, session=d.session),
        )
    return docs


def edit(docs: list[Doc], index: int, add: bool, grant: str) -> Doc:
    """Apply one drawn edit to the model; the document it applies to (the caller writes it)."""
    doc = docs[index % len(docs)]
    (doc.grants.add if add else doc.grants.discard)(grant)
    return doc


def leaked(docs: list[Doc], allowed: set[str], output: str) -> list[str]:
    """The sources of documents not in ``allowed`` whose marker or source name is in ``output``."""
    return [d.source for d in docs if d.source not in allowed and (d.marker in output or d.source in output)]
