"""The pipeline steps. Each is a :class:`~agentrag.step.Step`: call it with a Context,
pipe a Context into it (``ctx | search()``), or await its async twin (``asearch``).
``answer_stream`` / ``aanswer_stream`` stream the answer (text pieces, then the Context)."""

from agentrag.steps.answer import aanswer_stream, answer, answer_stream
from agentrag.steps.decompose import decompose
from agentrag.steps.enrich import enrich
from agentrag.steps.gate import gate
from agentrag.steps.new import new
from agentrag.steps.rerank import rerank
from agentrag.steps.rewrite import rewrite
from agentrag.steps.route import route
from agentrag.steps.search import search

agate = gate.arun
arewrite = rewrite.arun
aroute = route.arun
adecompose = decompose.arun
asearch = search.arun
arerank = rerank.arun
aenrich = enrich.arun
aanswer = answer.arun

__all__ = [
    "aanswer",
    "aanswer_stream",
    "adecompose",
    "aenrich",
    "agate",
    "answer",
    "answer_stream",
    "arerank",
    "arewrite",
    "aroute",
    "asearch",
    "decompose",
    "enrich",
    "gate",
    "new",
    "rerank",
    "rewrite",
    "route",
    "search",
]
