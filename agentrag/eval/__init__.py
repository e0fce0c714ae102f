"""Retrieval and answer evaluation: BEIR loading and indexing, evaluation runs, IR metrics and reports.

Nothing here imports numpy or pandas at import time; :meth:`EvalReport.to_pandas` imports pandas
when called.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Names resolve on first use (PEP 562): the CLI registers ``agentrag eval`` with
# ``agentrag.eval.answers_cli`` on every call (``agentrag search`` too), without the BEIR loader, the
# runs and the reports.
_LAZY = {
    "BeirDataset": "beir",
    "BeirDoc": "beir",
    "load_beir": "beir",
    "citation_precision": "metrics",
    "dcg": "metrics",
    "grounded_rate": "metrics",
    "hit_at_k": "metrics",
    "mrr": "metrics",
    "ndcg_at_k": "metrics",
    "precision_at_k": "metrics",
    "rank_by_score": "metrics",
    "recall_at_k": "metrics",
    "DEFAULT_COMPARE_COLUMNS": "report",
    "DEFAULT_K_VALUES": "report",
    "Comparison": "report",
    "EvalReport": "report",
    "QueryEval": "report",
    "compare": "report",
    "evaluate_rankings": "report",
    "BEIR_CHUNK_SIZE": "run",
    "EvalProgress": "run",
    "evaluate": "run",
    "ingest_beir": "run",
    "subset": "run",
}

if TYPE_CHECKING:
    from agentrag.eval.beir import BeirDataset, BeirDoc, load_beir
    from agentrag.eval.metrics import (
        citation_precision,
        dcg,
        grounded_rate,
        hit_at_k,
        mrr,
        ndcg_at_k,
        precision_at_k,
        rank_by_score,
        recall_at_k,
    )
    from agentrag.eval.report import (
        DEFAULT_COMPARE_COLUMNS,
        DEFAULT_K_VALUES,
        Comparison,
        EvalReport,
        QueryEval,
        compare,
        evaluate_rankings,
    )
    from agentrag.eval.run import BEIR_CHUNK_SIZE, EvalProgress, evaluate, ingest_beir, subset

__all__ = [
    "BEIR_CHUNK_SIZE",
    "DEFAULT_COMPARE_COLUMNS",
    "DEFAULT_K_VALUES",
    "BeirDataset",
    "BeirDoc",
    "Comparison",
    "EvalProgress",
    "EvalReport",
    "QueryEval",
    "citation_precision",
    "compare",
    "dcg",
    "evaluate",
    "evaluate_rankings",
    "grounded_rate",
    "hit_at_k",
    "ingest_beir",
    "load_beir",
    "mrr",
    "ndcg_at_k",
    "precision_at_k",
    "rank_by_score",
    "recall_at_k",
    "subset",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrag.eval' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"agentrag.eval.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
