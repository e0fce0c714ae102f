"""``lexical_sql`` in every language: the text search configuration of a chunk, the tsquery of a question.

A chunk's language is its collection's declared one, else its document's (None: English), as in
the BM25 leg. Two analyses, the same at ingest (:func:`agentrag.store.text_index.sync_tsvectors`)
and at query (:func:`lexical_sql_leg`):

* a language with a PostgreSQL configuration on the server (``Language.ts_config`` of
  :data:`agentrag.languages.LANGUAGES`, found in ``pg_ts_config``): PostgreSQL analyses both ends,
  ``to_tsvector(cfg, text)`` and ``to_tsquery(cfg, words)`` (its Snowball stemmer and stop words).
  English is this case with ``english``, its query words exactly as before languages
  (:func:`tsquery_text`: our English stop words dropped);
* any other (Chinese, Japanese, Korean and Thai cut into bigrams; Czech, Polish, Persian stemmed by
  PyStemmer; Vietnamese, Ukrainian as words): :func:`agentrag.languages.analyze` gives the tokens,
  which go space-joined through ``simple`` at both ends.

A collection of several languages is searched with the question analysed in each (the tsqueries
OR-ed with ``tsquery_or``), as the BM25 leg does. Configuration names never reach the SQL text: they
come from :data:`~agentrag.languages.LANGUAGES` (an allow-list) intersected with the server's, and
are bound as parameters cast to ``regconfig``. Query words keep only letters, digits and combining
marks, so no tsquery operator (``& | ! ( ) : * < > ' \\``) reaches the parser.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agentrag.languages import DEFAULT_LANGUAGE, LANGUAGES, analyze, segment_scripts
from agentrag.retrieval.tokenize import STOPWORDS_EN

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = [
    "MAX_TSQUERY_TERMS",
    "SIMPLE",
    "TS_CONFIG_NAMES",
    "analysed_text",
    "lexical_sql_leg",
    "sql_configs",
    "tsquery_parts",
    "tsquery_text",
]

MAX_TSQUERY_TERMS = 256
SIMPLE = "simple"
#: Every configuration a supported language may use (the allow-list checked against pg_ts_config).
TS_CONFIG_NAMES: tuple[str, ...] = tuple(sorted({x.ts_config for x in LANGUAGES.values()} - {SIMPLE}))
_MAX_TERM_BYTES = 200  # PostgreSQL refuses tsquery words over 2047 bytes; real words are far shorter
_WORDS = re.compile(r"\w+")


def sql_configs(available: Iterable[str]) -> dict[str, str]:
    """Language code -> configuration, for the languages PostgreSQL analyses itself (``available``:
    the server's ``pg_ts_config`` names). English is always there."""
    have = set(available) | {"english"}
    return {
        code: lang.ts_config
        for code, lang in LANGUAGES.items()
        if lang.ts_config != SIMPLE and lang.ts_config in have
    }


def analysed_text(text: str, language: str) -> str:
    """What ``simple`` indexes for a chunk in a language PostgreSQL does not analyse: our tokens."""
    return " ".join(analyze(text, language))


def tsquery_text(query: str) -> str:
    """The English OR tsquery source for ``query``; ``""`` when no word is left: NFKC, lower case,
    ``\\w+`` words, every non-alphanumeric character removed, our English stop words dropped,
    deduplicated, at most :data:`MAX_TSQUERY_TERMS`, each at most 200 bytes, joined by ``" | "``."""
    if not query.isascii():
        query = unicodedata.normalize("NFKC", query)
    terms: dict[str, None] = {}
    for word in _WORDS.findall(query.lower()):
        term = "".join(ch for ch in word if ch.isalnum())
        if len(term) < 2 or term in STOPWORDS_EN or len(term.encode("utf-8", "ignore")) > _MAX_TERM_BYTES:
            continue
        if not term.isascii():
            try:
                term.encode("utf-8")
            except UnicodeEncodeError:  # pragma: no cover - isalnum() excludes surrogates
                continue
        terms[term] = None
        if len(terms) >= MAX_TSQUERY_TERMS:
            break
    return " | ".join(terms)


def _or_terms(words: Iterable[str]) -> str:
    """Words with only letters, digits and combining marks, two characters or more, deduplicated,
    capped, joined by ``" | "``."""
    terms: dict[str, None] = {}
    for word in words:
        term = "".join(ch for ch in word if ch.isalnum() or unicodedata.category(ch).startswith("M"))
        if len(term) < 1 or len(term.encode("utf-8", "replace")) > _MAX_TERM_BYTES:
            continue
        terms[term] = None
        if len(terms) >= MAX_TSQUERY_TERMS:
            break
    return " | ".join(terms)


def tsquery_parts(
    query: str, languages: Iterable[str | None], configs: dict[str, str]
) -> list[tuple[str, str]]:
    """``[(configuration, tsquery source), ...]`` of ``query`` for a collection of ``languages``
    (``configs``: :func:`sql_configs` of the server); parts without a word are left out."""
    parts: dict[tuple[str, str], None] = {}
    for code in sorted({code or DEFAULT_LANGUAGE for code in languages} or {DEFAULT_LANGUAGE}):
        config = configs.get(code)
        if code == DEFAULT_LANGUAGE:
            config, source = "english", tsquery_text(query)
        elif config is not None:  # PostgreSQL's stemmer and stop words take the words as they are
            source = _or_terms(run for run, _ in segment_scripts(query) if len(run) >= 2)
        else:
            config, source = SIMPLE, _or_terms(analyze(query, code))
        if source:
            parts[(config, source)] = None
    return list(parts)


def _tsquery_sql(count: int) -> str:
    """``to_tsquery`` of bound parts, OR-ed: one part is exactly the English query of before."""
    sql = "to_tsquery(CAST(:ts_config_0 AS regconfig), :tsq_0)"
    for i in range(1, count):
        sql = f"tsquery_or({sql}, to_tsquery(CAST(:ts_config_{i} AS regconfig), :tsq_{i}))"
    return sql


_LEXICAL_TS_SQL = """
SELECT c.id, ts_rank(t.tsv, q, 1) AS score
FROM agentrag.chunk_tsv t
JOIN agentrag.chunks c ON c.id = t.chunk_id
JOIN agentrag.documents d ON d.id = c.document_id,
     {tsquery} AS q
WHERE t.collection_id = {cid} AND t.tsv @@ q AND ({where})
ORDER BY score DESC, c.id COLLATE "C"
LIMIT :depth
"""

_LANGUAGES_SQL = """
SELECT col.tsv_languages,
       ARRAY(SELECT cfgname::text FROM pg_ts_config WHERE cfgname::text = ANY(:names)) AS configs
FROM agentrag.collections col WHERE col.id = :cid
"""


def lexical_sql_leg(
    conn: Connection,
    *,
    collection_id: int,
    query: str,
    where: str,
    params: dict[str, Any],
    depth: int,
) -> list[tuple[str, float]]:
    """``[(chunk_id, ts_rank), ...]`` best first, at most ``depth``, for one collection."""
    from sqlalchemy import text

    row = conn.execute(
        text(_LANGUAGES_SQL), {"cid": int(collection_id), "names": list(TS_CONFIG_NAMES)}
    ).one_or_none()
    if row is None:
        return []
    languages = row.tsv_languages or [DEFAULT_LANGUAGE]
    parts = tsquery_parts(query, languages, sql_configs(row.configs))
    if not parts:
        return []
    bound: dict[str, Any] = {}
    for i, (config, source) in enumerate(parts):
        bound[f"ts_config_{i}"], bound[f"tsq_{i}"] = config, source
    sql = _LEXICAL_TS_SQL.format(tsquery=_tsquery_sql(len(parts)), cid=int(collection_id), where=where)
    rows = conn.execute(text(sql), {**params, **bound, "depth": int(depth)}).all()
    return [(row.id, float(row.score)) for row in rows]
