"""Evaluation reports: per-query metrics, their means, and renderings for terminals and notebooks.

:func:`evaluate_rankings` scores rankings against qrels into an :class:`EvalReport`;
:func:`compare` puts several reports side by side. Both render as a text table (``str``), a
compact one-liner (``repr``), HTML and Markdown for notebooks (everything escaped), a pandas
DataFrame (pandas is optional and imported only when asked for) and a JSON-serialisable dict.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from agentrag.errors import InvalidInputError
from agentrag.eval.metrics import hit_at_k, mrr, ndcg_at_k, precision_at_k, recall_at_k, unique_ids

__all__ = [
    "DEFAULT_COMPARE_COLUMNS",
    "DEFAULT_K_VALUES",
    "Comparison",
    "EvalReport",
    "QueryEval",
    "compare",
    "evaluate_rankings",
]

DEFAULT_K_VALUES: tuple[int, ...] = (1, 5, 10, 100)
DEFAULT_COMPARE_COLUMNS: tuple[str, ...] = ("ndcg@10", "recall@100", "qps", "p50_ms", "p99_ms")

_METRICS: tuple[tuple[str, Callable[[Sequence[str], Mapping[str, float], int], float | None]], ...] = (
    ("ndcg", ndcg_at_k),
    ("recall", recall_at_k),
    ("precision", precision_at_k),
    ("hit", hit_at_k),
    ("mrr", mrr),
)
_MAIN_METRICS = ("ndcg@10", "recall@100", "mrr@10")
_LOWER_IS_BETTER = ("p50_ms", "p99_ms")
_KEYED = re.compile(r"^(?P<family>.+)@(?P<k>\d+)$")
_HTML_MAX_ROWS = 200


# -- small helpers -----------------------------------------------------------------------------------


def _percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default method), ``q`` in [0, 100]."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _fmt(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if key == "queries":
        return str(int(value))
    if key == "qps":
        return f"{value:,.1f}"
    if key.endswith("_ms"):
        return f"{value:.2f}"
    return f"{value:.4f}"


_HEADLINE = ("queries", "qps", "p50_ms", "p99_ms")  # in the headline, not in the tables


def _md(text: Any) -> str:
    """Escape for a Markdown table cell: HTML-escaped, Markdown punctuation and pipes backslashed."""
    escaped = html.escape(str(text)).replace("\r", " ").replace("\n", " ")
    return re.sub(r"([\\`*_\[\]|#])", r"\\\1", escaped)


def _h(text: Any) -> str:
    return html.escape(str(text))


def _jsonable(value: Any) -> Any:
    """A JSON-serialisable copy: mappings get str keys, sequences become lists, the rest str()."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(item) for item in value]
    return str(value)


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    return "\n".join([line(header), *(line(row) for row in rows)])


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]], *, raw: bool = False) -> str:
    """An HTML table; cells are escaped unless ``raw`` (then the caller escaped them)."""
    cell = (lambda text: text) if raw else _h
    head = "".join(f"<th>{_h(title)}</th>" for title in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(text)}</td>" for text in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]], *, raw: bool = False) -> str:
    cell = (lambda text: text) if raw else _md
    lines = [
        "| " + " | ".join(_md(title) for title in header) + " |",
        "|" + "|".join(":---" if i == 0 else "---:" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(cell(text) for text in row) + " |" for row in rows]
    return "\n".join(lines)


def _grid(summary: Mapping[str, float]) -> tuple[list[str], list[list[str]], list[tuple[str, float]]]:
    """Split summary keys into a family x k grid (header, rows) and the other keys."""
    families: dict[str, dict[int, float]] = {}
    others: list[tuple[str, float]] = []
    for key, value in summary.items():
        match = _KEYED.match(key)
        if match:
            families.setdefault(match["family"], {})[int(match["k"])] = value
        else:
            others.append((key, value))
    ks = sorted({k for by_k in families.values() for k in by_k})
    header = ["metric", *(f"@{k}" for k in ks)]
    rows = [[family, *(_fmt(family, by_k.get(k)) for k in ks)] for family, by_k in families.items()]
    return header, rows, others


# -- per-query results and reports -----------------------------------------------------------------


@dataclass(frozen=True)
class QueryEval:
    """The evaluation of one query: what was retrieved and the metrics it scored.

    A metric is ``None`` when it is undefined for the query (no relevant document in the qrels).
    """

    query_id: str
    query: str
    retrieved: tuple[str, ...]
    metrics: dict[str, float | None]
    latency_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "query": self.query,
            "retrieved": list(self.retrieved),
            "metrics": _jsonable(self.metrics),
            "latency_ms": _jsonable(self.latency_ms),
        }


@dataclass(frozen=True)
class EvalReport:
    """Per-query evaluation of one system (``name``, run with ``config``) over a query set."""

    name: str
    config: dict[str, Any]
    per_query: tuple[QueryEval, ...] = field(repr=False)

    def summary(self) -> dict[str, float]:
        """Means of every metric over the queries where it is defined (not ``None``).

        A metric undefined for every query is left out. Also ``queries`` (the number of queries)
        and, when latencies were recorded, ``qps`` (queries per second run one after another:
        queries / total latency), ``p50_ms`` and ``p99_ms`` (linear-interpolation percentiles).
        """
        totals: dict[str, list[float]] = {}
        for result in self.per_query:
            for key, value in result.metrics.items():
                bucket = totals.setdefault(key, [])
                if value is not None:
                    bucket.append(value)
        out = {key: sum(values) / len(values) for key, values in totals.items() if values}
        out["queries"] = float(len(self.per_query))
        latencies = [r.latency_ms for r in self.per_query if r.latency_ms is not None]
        if latencies:
            total_ms = sum(latencies)
            if total_ms > 0:
                out["qps"] = len(latencies) / (total_ms / 1000.0)
            out["p50_ms"] = _percentile(latencies, 50)
            out["p99_ms"] = _percentile(latencies, 99)
        return out

    def _main(self, summary: Mapping[str, float]) -> list[str]:
        main = [key for key in _MAIN_METRICS if key in summary]
        if not main:
            main = [key for key in summary if _KEYED.match(key)][:3]
        return main

    def __repr__(self) -> str:
        summary = self.summary()
        parts = [repr(self.name), f"queries={_fmt('queries', summary['queries'])}"]
        parts += [f"{key}={_fmt(key, summary[key])}" for key in self._main(summary)]
        parts += [f"{key}={_fmt(key, summary[key])}" for key in ("qps", "p50_ms") if key in summary]
        return f"EvalReport({', '.join(parts)})"

    def _headline(self, summary: Mapping[str, float]) -> list[tuple[str, str]]:
        keys = [key for key in _HEADLINE if key in summary]
        return [(key, _fmt(key, summary[key])) for key in keys]

    def _summary_tables(
        self, summary: Mapping[str, float], table: Callable[[Sequence[str], Sequence[Sequence[str]]], str]
    ) -> list[str]:
        """The metric grid and the other means, drawn by ``table`` (text, HTML or Markdown)."""
        header, rows, others = _grid(summary)
        extra = [[key, _fmt(key, value)] for key, value in others if key not in _HEADLINE]
        return ([table(header, rows)] if rows else []) + ([table(["metric", "mean"], extra)] if extra else [])

    def __str__(self) -> str:
        summary = self.summary()
        lines = [f"EvalReport: {self.name}"]
        if self.config:
            lines.append("config: " + ", ".join(f"{key}={value!r}" for key, value in self.config.items()))
        lines.append("  ".join(f"{key} {value}" for key, value in self._headline(summary)))
        for table in self._summary_tables(summary, _text_table):
            lines += ["", table]
        return "\n".join(lines)

    def _per_query_rows(self, keys: Sequence[str]) -> tuple[list[str], list[list[str]]]:
        header = ["query_id", "query", *keys, "latency_ms"]
        rows = [
            [r.query_id, r.query, *(_fmt(key, r.metrics.get(key)) for key in keys), _fmt("_ms", r.latency_ms)]
            for r in self.per_query
        ]
        return header, rows

    def _repr_html_(self) -> str:
        summary = self.summary()
        headline = " · ".join(f"{_h(key)} {_h(value)}" for key, value in self._headline(summary))
        parts = [f'<div class="agentrag-eval-report"><p><strong>{_h(self.name)}</strong> · {headline}</p>']
        parts += self._summary_tables(summary, _html_table)
        if self.config:
            config_rows = [[str(key), repr(value)] for key, value in self.config.items()]
            parts.append(
                f"<details><summary>config</summary>{_html_table(['key', 'value'], config_rows)}</details>"
            )
        pq_header, pq_rows = self._per_query_rows(self._main(summary))
        shown = pq_rows[:_HTML_MAX_ROWS]
        more = len(pq_rows) - len(shown)
        note = f"<p>… {more} more (see to_pandas())</p>" if more > 0 else ""
        table = _html_table(pq_header, shown)
        parts.append(f"<details><summary>per query ({len(pq_rows)})</summary>{table}{note}</details>")
        parts.append("</div>")
        return "".join(parts)

    def _repr_markdown_(self) -> str:
        summary = self.summary()
        headline = " · ".join(f"{_md(key)} {_md(value)}" for key, value in self._headline(summary))
        return "\n\n".join([f"**{_md(self.name)}** · {headline}", *self._summary_tables(summary, _md_table)])

    def to_pandas(self) -> Any:
        """One row per query (index ``query_id``): query, retrieved, every metric, latency_ms."""
        pd = _import_pandas("EvalReport.to_pandas()")
        keys: dict[str, None] = {}
        for result in self.per_query:
            keys.update(dict.fromkeys(result.metrics))
        records = [
            {
                "query_id": r.query_id,
                "query": r.query,
                "retrieved": list(r.retrieved),
                **{key: r.metrics.get(key) for key in keys},
                "latency_ms": r.latency_ms,
            }
            for r in self.per_query
        ]
        columns = ["query_id", "query", "retrieved", *keys, "latency_ms"]
        return pd.DataFrame.from_records(records, columns=columns).set_index("query_id")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict: name, config, summary and per-query results."""
        return {
            "name": self.name,
            "config": _jsonable(self.config),
            "summary": _jsonable(self.summary()),
            "per_query": [result.to_dict() for result in self.per_query],
        }


def _import_pandas(what: str) -> Any:
    try:
        import pandas
    except ImportError as exc:
        raise ImportError(
            f"{what} needs pandas, which is not installed: pip install 'agentrag[pandas]'"
        ) from exc
    return pandas


def evaluate_rankings(
    name: str,
    config: Mapping[str, Any],
    rankings: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    queries: Mapping[str, str] | None = None,
    *,
    k_values: Iterable[int] = DEFAULT_K_VALUES,
    latencies_ms: Mapping[str, float] | None = None,
) -> EvalReport:
    """Score ``rankings`` (query id -> doc ids, best first) against ``qrels`` into an :class:`EvalReport`.

    Every query in ``qrels`` is evaluated, in qrels order; a query with no ranking counts as an
    empty ranking (it scores 0, it is not skipped). Rankings of queries absent from ``qrels`` are
    ignored. For each ``k`` in ``k_values`` the metrics ``ndcg@k``, ``recall@k``, ``precision@k``,
    ``hit@k`` and ``mrr@k`` are computed (see :mod:`agentrag.eval.metrics`); they are ``None`` for a
    query whose qrels hold no relevant document, and :meth:`EvalReport.summary` skips those.
    ``retrieved`` keeps each ranking deduplicated and cut at the largest ``k``.
    """
    ks = sorted(set(k_values))
    if not ks:
        raise InvalidInputError("k_values is empty")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"k_values must hold ints, got {type(k).__name__}")
        if k < 1:
            raise InvalidInputError(f"k_values must be >= 1, got {k}")
    max_k = ks[-1]
    texts = queries or {}
    latencies = latencies_ms or {}
    results: list[QueryEval] = []
    for query_id, judged in qrels.items():
        ranking = rankings.get(query_id, ())
        if isinstance(ranking, str):
            raise TypeError(f"the ranking of query {query_id!r} is a str; pass a sequence of doc ids")
        ranked = unique_ids(ranking, max_k)
        metrics: dict[str, float | None] = {
            f"{family}@{k}": metric(ranked, judged, k) for family, metric in _METRICS for k in ks
        }
        latency = latencies.get(query_id)
        results.append(
            QueryEval(
                query_id=query_id,
                query=texts.get(query_id, ""),
                retrieved=tuple(ranked),
                metrics=metrics,
                latency_ms=None if latency is None else float(latency),
            )
        )
    return EvalReport(name=name, config=dict(config), per_query=tuple(results))


# -- comparisons -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """Several reports side by side: one row per report, one column per summary key in ``columns``.

    With two reports or more and a ``significance`` metric (default ``ndcg@10``), two more
    columns give each report's two-sided paired p-value against the ``baseline`` report (index,
    default 0, the first): ``p_rand`` (Fisher's randomisation test, ``n_permutations`` sign
    flips, seeded) and ``p_t`` (paired t-test), over the per-query values of that metric on the
    queries both reports scored (see :mod:`agentrag.eval.significance`). The baseline's own
    cells are empty. In HTML and Markdown the best value of each column is bold (highest, or
    lowest for latencies).
    """

    reports: tuple[EvalReport, ...]
    columns: tuple[str, ...] = DEFAULT_COMPARE_COLUMNS
    baseline: int = 0
    significance: str | None = "ndcg@10"
    n_permutations: int = 10_000
    seed: int = 0

    @cached_property
    def p_values(self) -> dict[str, dict[str, float] | None]:
        """Report name -> ``{"p_rand": ..., "p_t": ..., "queries": n}`` against the baseline (None for it).

        Empty when there is one report or no significance metric.
        """
        from agentrag.eval.significance import paired_randomization_test, paired_t_test

        metric = self.significance
        if metric is None or len(self.reports) < 2:
            return {}
        base = self.reports[self.baseline]
        base_values = {r.query_id: r.metrics.get(metric) for r in base.per_query}
        out: dict[str, dict[str, float] | None] = {}
        for index, report in enumerate(self.reports):
            if index == self.baseline:
                out[report.name] = None
                continue
            pairs = [
                (base_values[r.query_id], r.metrics.get(metric))
                for r in report.per_query
                if base_values.get(r.query_id) is not None and r.metrics.get(metric) is not None
            ]
            if not pairs:
                out[report.name] = None
                continue
            a = [float(x) for x, _ in pairs]  # type: ignore[arg-type]
            b = [float(y) for _, y in pairs]  # type: ignore[arg-type]
            out[report.name] = {
                "p_rand": paired_randomization_test(a, b, n_permutations=self.n_permutations, seed=self.seed),
                "p_t": paired_t_test(a, b),
                "queries": float(len(pairs)),
            }
        return out

    def rows(self) -> list[dict[str, Any]]:
        """One dict per report: ``name``, ``queries``, each column (``None`` where absent) and,
        when significance is computed, ``p_rand`` and ``p_t`` (``None`` for the baseline)."""
        out = []
        p_values = self.p_values
        for report in self.reports:
            summary = report.summary()
            row: dict[str, Any] = {"name": report.name, "queries": int(summary["queries"])}
            row.update({column: summary.get(column) for column in self.columns})
            if p_values:
                tests = p_values.get(report.name)
                row["p_rand"] = None if tests is None else tests["p_rand"]
                row["p_t"] = None if tests is None else tests["p_t"]
            out.append(row)
        return out

    def _header(self) -> list[str]:
        return ["name", "queries", *self.columns, *(("p_rand", "p_t") if self.p_values else ())]

    def _cells(self) -> list[list[str]]:
        keys = self._header()
        return [[_fmt(key, row[key]) if key != "name" else row[key] for key in keys] for row in self.rows()]

    def _best(self) -> dict[str, float]:
        best: dict[str, float] = {}
        rows = self.rows()
        if len(rows) < 2:
            return best
        for column in self.columns:
            values = [row[column] for row in rows if row[column] is not None]
            if values and column not in ("p_rand", "p_t"):
                best[column] = min(values) if column in _LOWER_IS_BETTER else max(values)
        return best

    def _marked(self, escape: Callable[[Any], str], bold: Callable[[str], str]) -> list[list[str]]:
        best = self._best()
        out = []
        for row in self.rows():
            cells = []
            for key in self._header():
                text = escape(_fmt(key, row[key]) if key != "name" else row[key])
                cells.append(bold(text) if key in best and row[key] == best[key] else text)
            out.append(cells)
        return out

    def __str__(self) -> str:
        return _text_table(self._header(), self._cells())

    def __repr__(self) -> str:
        names = ", ".join(repr(report.name) for report in self.reports)
        return f"Comparison({len(self.reports)} reports: {names})"

    def _repr_html_(self) -> str:
        rows = self._marked(_h, lambda text: f"<strong>{text}</strong>")
        return f'<div class="agentrag-eval-comparison">{_html_table(self._header(), rows, raw=True)}</div>'

    def _repr_markdown_(self) -> str:
        return _md_table(self._header(), self._marked(_md, lambda text: f"**{text}**"), raw=True)

    def to_pandas(self) -> Any:
        """One row per report (index ``name``), columns ``queries`` and ``columns``."""
        pd = _import_pandas("Comparison.to_pandas()")
        return pd.DataFrame.from_records(self.rows(), columns=self._header()).set_index("name")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict: the columns and one row per report."""
        return {"columns": list(self._header()), "rows": _jsonable(self.rows())}


def compare(
    reports: Sequence[EvalReport],
    *,
    columns: Sequence[str] = DEFAULT_COMPARE_COLUMNS,
    baseline: int | str = 0,
    significance: str | None = "auto",
    n_permutations: int = 10_000,
    seed: int = 0,
) -> Comparison:
    """Put ``reports`` side by side (see :class:`Comparison`); ``columns`` are summary keys.

    ``baseline`` (an index or a report name) is what the p-values compare against; ``significance``
    is the per-query metric they are computed on: ``"auto"`` (default) is ``ndcg@10`` when the
    reports have it (else no p-values), None none, any other name that metric (InvalidInputError
    when no report has it).
    """
    if not reports:
        raise InvalidInputError("compare() needs at least one report")
    names = [report.name for report in reports]
    if len(set(names)) != len(names):
        raise InvalidInputError(f"compare() needs reports with distinct names, got {names}")
    if isinstance(baseline, str):
        if baseline not in names:
            raise InvalidInputError(f"baseline {baseline!r} is not one of the reports {names}")
        baseline = names.index(baseline)
    if isinstance(baseline, bool) or not isinstance(baseline, int) or not 0 <= baseline < len(reports):
        raise InvalidInputError(
            f"baseline must be a report name or an index below {len(reports)}, got {baseline!r}"
        )
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int) or n_permutations < 1:
        raise InvalidInputError(f"n_permutations must be an integer >= 1, got {n_permutations!r}")

    def has(metric: str) -> bool:
        return any(metric in r.metrics for report in reports for r in report.per_query)

    if significance == "auto":
        significance = "ndcg@10" if has("ndcg@10") else None
    elif significance is not None and not has(significance):
        raise InvalidInputError(f"no report has the metric {significance!r} for the significance tests")
    return Comparison(
        reports=tuple(reports),
        columns=tuple(columns),
        baseline=baseline,
        significance=significance,
        n_permutations=n_permutations,
        seed=seed,
    )
