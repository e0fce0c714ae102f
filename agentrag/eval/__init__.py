"""Retrieval and answer evaluation: BEIR loading and indexing, evaluation runs, IR metrics and reports.

Nothing here imports numpy or pandas at import time; :meth:`EvalReport.to_pandas` imports pandas
when called.
"""

from __future__ import annotations

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
