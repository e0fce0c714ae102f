"""English tokenizer of the lexical (BM25) leg: the same tokens for chunks and queries.

Pipeline, per text:

1. Unicode NFKC normalisation (skipped for pure-ASCII text): ligatures, full-width and
   compatibility forms fold to their plain letters (``ﬁ`` -> ``fi``, ``Ｔ`` -> ``T``).
2. Lower-casing (``str.lower``; the dotted capital ``İ`` becomes a plain ``i``).
3. Word splitting with ``\\w\\w+`` (runs of two or more Unicode letters/digits/underscores):
   punctuation, whitespace, query-syntax characters (``& | ! ( ) : * " '``), symbols and emoji
   separate words and never become tokens; one-character words are dropped. This is the
   default ``token_pattern`` of bm25s and scikit-learn.
4. Stop-word removal with :data:`STOPWORDS_EN`, the English list bm25s uses for
   ``stopwords="en"`` (the Lucene / Elasticsearch English analyzer's list).
5. Snowball English ("Porter2") stemming via PyStemmer, memoised in a bounded dict.

This is exactly bm25s' own ``bm25s.tokenize(texts, stopwords="en",
stemmer=Stemmer.Stemmer("english"))`` pipeline plus step 1, which changes nothing for ASCII
text. Deterministic, thread-safe, and it never raises on a ``str``.

PyStemmer is imported on the first cache miss, not when this module is imported.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Iterable

__all__ = ["STOPWORDS_EN", "tokenize", "tokenize_many"]

#: English stop words: bm25s' ``STOPWORDS_EN`` (= Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``).
#: Deliberately short: longer lists (NLTK, scikit-learn) also drop words such as "not", "no",
#: "above" or "first", which carry meaning in claims and questions.
STOPWORDS_EN: frozenset[str] = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    }
)

_find_words: Callable[[str], list[str]] = re.compile(r"\w\w+").findall

# Memoised stems. Bounded so hostile or endless vocabularies cannot grow it without limit:
# when full it is cleared and refills with the words in use.
_STEM_CACHE_MAX = 1 << 20
_stem_cache: dict[str, str] = {}
# A PyStemmer ``Stemmer`` has internal state and must not be used by two threads at once.
_stemmer_lock = threading.Lock()
_stem_word: Callable[[str], str] | None = None


def _stem_miss(word: str) -> str:
    """Stem ``word`` with PyStemmer and remember the result."""
    global _stem_word
    with _stemmer_lock:
        if _stem_word is None:
            import Stemmer

            _stem_word = Stemmer.Stemmer("english", 0).stemWord
        stem = _stem_word(word)
    if len(_stem_cache) >= _STEM_CACHE_MAX:
        _stem_cache.clear()
    _stem_cache[word] = stem
    return stem


def _fold(text: str) -> str:
    """NFKC + lower-case for non-ASCII text."""
    # "İ".lower() is "i" + U+0307 COMBINING DOT ABOVE, which would split the word: rejoin it.
    return unicodedata.normalize("NFKC", text).lower().replace("i\u0307", "i")


def tokenize(text: str) -> list[str]:
    """Return the BM25 tokens of ``text``: normalised, lower-cased, stop words removed, stemmed.

    Every token is a non-empty lower-case string. Text without words (empty, punctuation,
    emoji, only stop words) gives ``[]``.

    >>> tokenize("The cells were RUNNING, aren't they?")
    ['cell', 'were', 'run', 'aren']
    """
    text = text.lower() if text.isascii() else _fold(text)
    cache = _stem_cache
    stop = STOPWORDS_EN
    out: list[str] = []
    append = out.append
    for word in _find_words(text):
        if word in stop:
            continue
        stem = cache.get(word)
        append(stem if stem is not None else _stem_miss(word))
    return out


def tokenize_many(texts: Iterable[str]) -> list[list[str]]:
    """:func:`tokenize` each text, in order."""
    return [tokenize(text) for text in texts]
