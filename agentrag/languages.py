"""The languages agentrag analyses: a collection's language, its lexical analysis, its detection.

A collection is declared in one language (``Store.create_collection(..., language="de")``) or left
to detection (``language=None``): each document's language is then identified at ingest
(:func:`detect`, py3langid) and recorded on the document; a collection of many languages is
analysed chunk by chunk, each in its document's language.

:data:`LANGUAGES` lists what each supported language uses:

* ``stemmer``: the Snowball algorithm of PyStemmer (None: words are kept as they are);
* ``ts_config``: the PostgreSQL text search configuration of ``lexical_sql`` (``simple`` where
  PostgreSQL has none);
* ``segment``: ``"words"`` (runs of letters, digits and combining marks: a Hindi or Arabic word
  keeps its vowel signs) or ``"bigrams"`` (scripts written without spaces, Chinese, Japanese,
  Korean and Thai: overlapping character bigrams, as Lucene's CJK analyzer does; a lone
  character is its own token). Words of another script inside a text (a Latin name in a Chinese
  sentence) are words in every language.

English is the tokenizer of :mod:`agentrag.retrieval.tokenize` exactly (its stop words, Porter2):
a document or collection without a language is analysed as English, as before languages existed.

Nothing here imports a model: PyStemmer loads on the first stem of a language, py3langid on the
first detection.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from agentrag.errors import UnsupportedLanguageError

__all__ = [
    "DEFAULT_LANGUAGE",
    "LANGUAGES",
    "Language",
    "analyze",
    "analyzer",
    "bigrams",
    "check_language",
    "detect",
    "query_analyzer",
    "query_tokens",
    "segment_scripts",
    "ts_config",
]

DEFAULT_LANGUAGE = "en"


@dataclass(frozen=True, slots=True)
class Language:
    code: str  # ISO 639-1
    name: str
    stemmer: str | None  # PyStemmer algorithm
    ts_config: str  # PostgreSQL text search configuration
    segment: str = "words"  # "words" or "bigrams"


def _lang(
    code: str, name: str, stemmer: str | None, ts: str | None = None, segment: str = "words"
) -> Language:
    return Language(code, name, stemmer, ts or "simple", segment)


#: Every supported language by ISO 639-1 code.
LANGUAGES: dict[str, Language] = {
    x.code: x
    for x in (
        _lang("en", "English", "english", "english"),
        _lang("ar", "Arabic", "arabic", "arabic"),
        _lang("ca", "Catalan", "catalan", "catalan"),
        _lang("cs", "Czech", "czech"),
        _lang("da", "Danish", "danish", "danish"),
        _lang("de", "German", "german", "german"),
        _lang("el", "Greek", "greek", "greek"),
        _lang("es", "Spanish", "spanish", "spanish"),
        _lang("eu", "Basque", "basque", "basque"),
        _lang("fa", "Persian", "persian"),
        _lang("fi", "Finnish", "finnish", "finnish"),
        _lang("fr", "French", "french", "french"),
        _lang("ga", "Irish", "irish", "irish"),
        _lang("hi", "Hindi", "hindi", "hindi"),
        _lang("hu", "Hungarian", "hungarian", "hungarian"),
        _lang("hy", "Armenian", "armenian", "armenian"),
        _lang("id", "Indonesian", "indonesian", "indonesian"),
        _lang("it", "Italian", "italian", "italian"),
        _lang("ja", "Japanese", None, segment="bigrams"),
        _lang("ko", "Korean", None, segment="bigrams"),
        _lang("lt", "Lithuanian", "lithuanian", "lithuanian"),
        _lang("ne", "Nepali", "nepali", "nepali"),
        _lang("nl", "Dutch", "dutch", "dutch"),
        _lang("no", "Norwegian", "norwegian", "norwegian"),
        _lang("pl", "Polish", "polish"),
        _lang("pt", "Portuguese", "portuguese", "portuguese"),
        _lang("ro", "Romanian", "romanian", "romanian"),
        _lang("ru", "Russian", "russian", "russian"),
        _lang("sr", "Serbian", "serbian", "serbian"),
        _lang("sv", "Swedish", "swedish", "swedish"),
        _lang("ta", "Tamil", "tamil", "tamil"),
        _lang("th", "Thai", None, segment="bigrams"),
        _lang("tr", "Turkish", "turkish", "turkish"),
        _lang("uk", "Ukrainian", None),
        _lang("vi", "Vietnamese", None),
        _lang("zh", "Chinese", None, segment="bigrams"),
    )
}


def check_language(code: Any, *, what: str = "language") -> str:
    """``code`` as a supported language code (lower-cased; ``zh-CN`` -> ``zh``); else
    UnsupportedLanguageError naming the supported ones."""
    if isinstance(code, str):
        base = code.strip().lower().replace("_", "-").split("-", 1)[0]
        if base in LANGUAGES:
            return base
    raise UnsupportedLanguageError(
        f"{what} {code!r} is not supported; expected one of {', '.join(sorted(LANGUAGES))} "
        "(or None: detect each document's language at ingest)"
    )


def ts_config(code: str | None) -> str:
    """The PostgreSQL text search configuration of a language (English for None)."""
    return LANGUAGES[code or DEFAULT_LANGUAGE].ts_config


# ---- segmentation --------------------------------------------------------------------------------
# Combining marks of the scripts above (vowel signs, viramas, harakat, Thai vowels and tones): part of
# a word, though ``\w`` does not match them.
_MARKS = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed"
    "\u0900-\u0903\u093a-\u094f\u0951-\u0957\u0962\u0963\u0981-\u0983\u09bc-\u09d7"
    "\u0b82-\u0bd7\u0e31\u0e34-\u0e3a\u0e47-\u0e4e"
)
# Scripts written without spaces between words: Han, kana, Hangul, Thai.
_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u0e00-\u0e7f"
_RUNS = re.compile(rf"[{_UNSPACED}]+|(?:(?![{_UNSPACED}])[\w{_MARKS}])+")
_UNSPACED_CHAR = re.compile(rf"[{_UNSPACED}]")


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower().replace("i\u0307", "i")


def bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of ``run``; a single character is its own token."""
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def segment_scripts(text: str) -> list[tuple[str, bool]]:
    """``(run, unspaced)`` pairs of folded ``text``: word runs and runs of an unspaced script."""
    return [(run, bool(_UNSPACED_CHAR.match(run))) for run in _RUNS.findall(_fold(text))]


# ---- stemming ------------------------------------------------------------------------------------
_stem_lock = threading.Lock()
_stemmers: dict[str, Callable[[str], str]] = {}
_stem_caches: dict[str, dict[str, str]] = {}
_STEM_CACHE_MAX = 1 << 18


def _stem(algorithm: str, word: str) -> str:
    cache = _stem_caches.get(algorithm)
    if cache is not None:
        found = cache.get(word)
        if found is not None:
            return found
    with _stem_lock:  # a PyStemmer Stemmer has state: one thread at a time
        stem_word = _stemmers.get(algorithm)
        if stem_word is None:
            import Stemmer

            stem_word = _stemmers[algorithm] = Stemmer.Stemmer(algorithm, 0).stemWord
            _stem_caches[algorithm] = {}
        stem = stem_word(word)
    cache = _stem_caches[algorithm]
    if len(cache) >= _STEM_CACHE_MAX:
        cache.clear()
    cache[word] = stem
    return stem


def analyze(text: str, language: str | None, *, stop_words: bool = False) -> list[str]:
    """The lexical tokens of ``text`` in ``language``: the same for chunks and queries.

    None and ``"en"``: the English tokenizer (:func:`agentrag.retrieval.tokenize.tokenize`,
    unchanged). Other languages: NFKC, lower case, word runs (letters, digits, combining marks) of
    two or more characters stemmed with the language's Snowball stemmer (kept as they are without
    one), and runs of Chinese, Japanese, Korean or Thai characters cut into bigrams. With
    ``stop_words`` (the BM25 leg), the language's Snowball stop words are dropped before stemming
    (:mod:`agentrag.retrieval.stopwords`; a language without a list keeps every word).

    >>> analyze("Die Verteidigung der Panthers", "de")
    ['die', 'verteid', 'der', 'panth']
    >>> analyze("超级碗50", "zh")
    ['超级', '级碗', '50']
    """
    if language is None or language == DEFAULT_LANGUAGE:
        from agentrag.retrieval.tokenize import tokenize

        return tokenize(text)
    algorithm = LANGUAGES[language].stemmer
    skip = _stop_words(language) if stop_words else frozenset()
    out: list[str] = []
    for run, unspaced in segment_scripts(text):
        if unspaced:
            out.extend(bigrams(run))
        elif len(run) >= 2 and run not in skip:
            out.append(_stem(algorithm, run) if algorithm else run)
    return out


def _stop_words(language: str) -> frozenset[str]:
    from agentrag.retrieval.stopwords import stop_words

    return stop_words(language)


def analyzer(language: str | None, *, stop_words: bool = False) -> Callable[[str], list[str]]:
    """:func:`analyze` in one language, as a function of the text (English: the tokenizer itself)."""
    if language is None or language == DEFAULT_LANGUAGE:
        from agentrag.retrieval.tokenize import tokenize

        return tokenize
    return partial(analyze, language=language, stop_words=stop_words)


def query_analyzer(
    languages: Iterable[str | None], *, stop_words: bool = False
) -> Callable[[str], list[str]]:
    """How a query is analysed for an index holding chunks of ``languages``: in each of them (once
    per distinct analysis, each token once), so a German chunk matches its German stems and an
    English chunk its English ones. One language: exactly :func:`analyzer`."""
    distinct = sorted({code or DEFAULT_LANGUAGE for code in languages})
    if len(distinct) <= 1:
        return analyzer(distinct[0] if distinct else None, stop_words=stop_words)
    return partial(query_tokens, languages=tuple(distinct), stop_words=stop_words)


def query_tokens(query: str, languages: Iterable[str | None], *, stop_words: bool = False) -> list[str]:
    """The tokens of ``query`` analysed in each of ``languages`` (see :func:`query_analyzer`)."""
    seen: dict[str, None] = {}
    out: list[str] = []
    for code in languages:
        fresh = [t for t in analyze(query, code, stop_words=stop_words) if t not in seen]
        out.extend(fresh)
        seen.update(dict.fromkeys(fresh))
    return out


# ---- detection -----------------------------------------------------------------------------------
_detect_lock = threading.Lock()
_identifier: Any = None
#: Characters of a text that detection reads: its start (identification needs no more).
DETECT_CHARS = 2000
#: The probability (py3langid's, normalised over the supported languages) a detection of ASCII text needs.
MIN_CONFIDENCE = 0.9


def detect(text: str, *, fallback: str | None = None) -> str | None:
    """The supported language of ``text`` by py3langid (restricted to :data:`LANGUAGES`), or
    ``fallback`` when the text has no letters, or is ASCII and the identifier is less sure than
    :data:`MIN_CONFIDENCE` (a few words: "refund policy" reads as German at 0.20; the scripts of
    other text narrow it down). Reads the first :data:`DETECT_CHARS` characters."""
    sample = text[:DETECT_CHARS]
    if not any(ch.isalpha() for ch in sample):
        return fallback
    global _identifier
    with _detect_lock:
        if _identifier is None:
            from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

            identifier = LanguageIdentifier.from_modelpath(MODEL_DIR / MODEL_FILE, norm_probs=True)
            identifier.set_languages(list(LANGUAGES))
            _identifier = identifier
        code, probability = _identifier.classify(sample)
    return str(code) if probability >= MIN_CONFIDENCE or not sample.isascii() else fallback
