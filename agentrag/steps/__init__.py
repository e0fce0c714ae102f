"""The pipeline steps. Each is a :class:`~agentrag.step.Step`: call it with a Context,
pipe a Context into it (``ctx | search()``), or await its async twin (``asearch``).
``answer_stream`` / ``aanswer_stream`` stream the answer (text pieces, then the Context).

This module is also the one seam between :mod:`agentrag.context` (a value module at the
bottom, which imports nothing above it) and what is built on it: importing the steps binds
the chaining methods (``ctx.route().search().answer()``) and ``ctx.proof()`` onto
:class:`~agentrag.context.Context`. (The notebook renderers are :mod:`agentrag.display`'s,
registered when ``agentrag`` loads: display stands above the steps.)
Every way to a step (``agentrag.new``, ``agentrag.Context``, ``agentrag.steps.*``) runs this
module first. The names bound are :data:`agentrag.context.BOUND_METHODS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentrag.context import BOUND_METHODS, Context
from agentrag.proof import build_proof
from agentrag.step import Step
from agentrag.steps.answer import aanswer_stream, answer, answer_stream
from agentrag.steps.condense import condense
from agentrag.steps.decompose import decompose
from agentrag.steps.enrich import enrich
from agentrag.steps.gate import gate
from agentrag.steps.new import new
from agentrag.steps.rerank import rerank
from agentrag.steps.rewrite import rewrite
from agentrag.steps.route import route
from agentrag.steps.search import search

agate = gate.arun
acondense = condense.arun
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
    "acondense",
    "adecompose",
    "aenrich",
    "agate",
    "answer",
    "answer_stream",
    "arerank",
    "arewrite",
    "aroute",
    "asearch",
    "condense",
    "decompose",
    "enrich",
    "gate",
    "new",
    "rerank",
    "rewrite",
    "route",
    "search",
]


def _chain(step: Step) -> Callable[..., Context]:
    def method(self: Context, **options: Any) -> Context:
        result: Context = step(self, **options)
        return result

    method.__name__ = method.__qualname__ = step.name
    method.__doc__ = f"``{step.name}(ctx, **options)`` as a method (see :mod:`agentrag.steps.{step.name}`)."
    return method


def _bind_context_methods() -> None:
    methods: dict[str, Callable[..., Any]] = {
        step.name: _chain(step)
        for step in (gate, condense, rewrite, route, decompose, search, rerank, enrich, answer)
    }
    methods.update(
        answer_stream=answer_stream,
        aanswer_stream=aanswer_stream,
        proof=build_proof,
    )
    assert sorted(methods) == sorted(BOUND_METHODS), "agentrag.context.BOUND_METHODS is out of date"
    for name, function in methods.items():
        setattr(Context, name, function)


_bind_context_methods()
