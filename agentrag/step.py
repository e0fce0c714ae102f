r"""What makes a function a step.

A step body is a plain function ``body(ctx, **options) -> Outcome``, or a generator that
``yield``\ s where it waits and returns the Outcome (one body for the sync and the async run,
see :mod:`agentrag._sansio`). :class:`Step` wraps it so that it

* checks its options at call time (an unknown option raises ``TypeError``),
* runs inside the span ``agentrag.<name>`` (start, stop attributes, exception status),
* returns an errored context untouched (the span is marked skipped),
* turns a runtime failure (any :class:`AgentragError` but bad input) into ``ctx.error``,
* builds the new Context in one place, appending the step record, LLM calls, warnings
  and degradations the body reported,
* works three ways: ``step(ctx, **o)``, ``ctx | step(**o)`` and ``await step.arun(ctx, **o)``,
* runs its optional ``after`` hook on the context it returns (audit events, query log,
  pipeline metrics); a failing hook only logs a warning.

A body that must hand out results while it works (``answer_stream``) drives the same
machinery through :meth:`Step.begin`, which returns a :class:`StepRun`.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agentrag._sansio import Body as SansIOBody
from agentrag._sansio import blocking, either, run_async, run_sync
from agentrag.context import Context, Degradation, StepRecord
from agentrag.errors import AgentragError, InvalidInputError
from agentrag.telemetry import DEFAULT_TELEMETRY, mark_degraded, mark_skipped, record_error

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from agentrag.llm import LLMCall
    from agentrag.telemetry import Telemetry

__all__ = ["BoundStep", "Outcome", "Step", "StepRun", "arun", "step"]

_UNSET: Any = object()
_log = logging.getLogger("agentrag")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a step body reports: the Context fields it sets and how it got there."""

    changes: Mapping[str, Any] = field(default_factory=dict)
    strategy: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)  # span stop attributes (no text!)
    content: Mapping[str, Any] = field(default_factory=dict)  # span attributes only with capture_content
    warnings: tuple[str, ...] = ()
    degradations: tuple[Degradation, ...] = ()
    llm_calls: tuple[LLMCall, ...] = ()
    stages: tuple[tuple[str, float], ...] = ()
    skipped: str | None = None
    # The step's main work failed and a fallback replaced it (e.g. the LLM failed, so raw
    # results): the span status becomes ERROR with this description; the context has no error.
    error_status: str | None = None


Body = Callable[..., Outcome | SansIOBody[Outcome]]
AsyncBody = Callable[..., Awaitable[Outcome]]
After = Callable[[Context], None]


def telemetry_of(ctx: Context) -> Telemetry:
    return ctx.deps.telemetry or DEFAULT_TELEMETRY


def calls_of(exc: BaseException) -> tuple[LLMCall, ...]:
    calls = getattr(exc, "calls", None)
    if calls:
        return tuple(calls)
    call = getattr(exc, "call", None)
    return (call,) if call is not None else ()


class Step:
    """A named pipeline step (see the module docstring)."""

    def __init__(
        self, name: str, body: Body, abody: AsyncBody | None = None, *, after: After | None = None
    ) -> None:
        self.name = name
        self._body = body
        self._abody = abody
        self._after_hook = after
        self._signature = inspect.signature(body)
        self._checked: set[frozenset[str]] = set()  # option-name sets already found valid
        functools.update_wrapper(self, body)

    def __repr__(self) -> str:
        return f"<step {self.name}{str(self._signature).replace('(ctx, ', '(', 1)}>"

    def check(self, options: Mapping[str, Any]) -> None:
        """Raise ``TypeError`` now for an option the step does not take.

        Options are keywords, so whether they bind depends only on their names: a set of names
        found valid once is remembered (``Signature.bind`` was ~0.02 ms of every served search)."""
        names = frozenset(options)
        if names in self._checked:
            return
        params = self._signature.parameters
        unknown = sorted(k for k in options if k not in params or k == "ctx")
        if unknown:
            valid = ", ".join(p for p in params if p != "ctx")
            raise TypeError(f"{self.name}() got unknown option(s) {', '.join(unknown)}; it takes: {valid}")
        try:
            self._signature.bind(None, **options)
        except TypeError as exc:
            raise TypeError(f"{self.name}(): {exc}") from None
        if len(self._checked) < 256:  # bounded: option names come from code, not from requests
            self._checked.add(names)

    def __call__(self, ctx: Context = _UNSET, /, **options: Any) -> Any:
        self.check(options)
        if ctx is _UNSET:
            return BoundStep(self, options)
        if not isinstance(ctx, Context):
            raise TypeError(f"{self.name}() takes a Context, got {type(ctx).__name__}")
        return self.run(ctx, **options)

    def run(self, ctx: Context, **options: Any) -> Context:
        self.check(options)
        return run_sync(self._lifecycle(ctx, options))

    async def arun(self, ctx: Context, **options: Any) -> Context:
        """The async twin: the same body, run concurrently-safe for asyncio backends."""
        self.check(options)
        if not isinstance(ctx, Context):
            raise TypeError(f"{self.name}() takes a Context, got {type(ctx).__name__}")
        return await run_async(self._lifecycle(ctx, options))

    def _lifecycle(self, ctx: Context, options: Mapping[str, Any]) -> SansIOBody[Context]:
        """The one body of :meth:`run` and :meth:`arun`: span, skip, error capture, new Context."""
        telemetry = telemetry_of(ctx)
        with telemetry.step_span(self.name) as span:
            if ctx.error is not None:
                mark_skipped(span, "the context already has an error")
                return self._after(ctx)
            start = time.perf_counter()
            try:
                outcome = yield from self._outcome(ctx, options)
            except InvalidInputError:
                raise
            except RecursionError:  # hostile nesting somewhere in the body's input: typed, never raw
                error = AgentragError(
                    f"{self.name}: the input is nested too deeply to process (RecursionError)"
                )
                return self._after(self._failed(ctx, error, start, span, telemetry))
            except AgentragError as exc:
                return self._after(self._failed(ctx, exc, start, span, telemetry))
            return self._after(self._finish(ctx, outcome, start, span, telemetry))

    def _outcome(self, ctx: Context, options: Mapping[str, Any]) -> SansIOBody[Outcome]:
        """The body's Outcome: a generator body is driven in place; a plain one is called (in
        a worker thread under ``arun``) unless it has an explicit async twin."""
        if inspect.isgeneratorfunction(self._body):
            outcome: Outcome = yield from self._body(ctx, **options)
            return outcome
        if self._abody is not None:
            return (yield either(self._body, self._abody, ctx, **options))
        return (yield blocking(self._body, ctx, **options))

    def begin(self, ctx: Context, **options: Any) -> StepRun:
        """Start a run whose body the caller drives (a stream): see :class:`StepRun`."""
        self.check(options)
        if not isinstance(ctx, Context):
            raise TypeError(f"{self.name}() takes a Context, got {type(ctx).__name__}")
        return StepRun(self, ctx)

    def _after(self, ctx: Context) -> Context:
        if self._after_hook is not None:
            try:
                self._after_hook(ctx)
            except Exception as exc:  # bookkeeping must never fail the step
                _log.warning("%s: the after-step hook failed: %s", self.name, type(exc).__name__)
        return ctx

    def _finish(
        self, ctx: Context, outcome: Outcome, start: float, span: Span, telemetry: Telemetry
    ) -> Context:
        duration = (time.perf_counter() - start) * 1000.0
        if outcome.strategy:
            span.set_attribute("agentrag.strategy", outcome.strategy)
        for key, value in outcome.attributes.items():
            span.set_attribute(f"agentrag.{self.name}.{key}", value)
        if telemetry.capture_content:
            for key, value in outcome.content.items():
                span.set_attribute(f"agentrag.{self.name}.{key}", value)
        if outcome.skipped:
            mark_skipped(span, outcome.skipped)
        for degradation in outcome.degradations:
            mark_degraded(span, degradation.kind, degradation.reason)
        if outcome.error_status:
            from opentelemetry.trace import Status, StatusCode

            span.set_status(Status(StatusCode.ERROR, outcome.error_status))
        record = StepRecord(self.name, outcome.strategy, duration, outcome.skipped)
        return replace(
            ctx,
            **outcome.changes,
            steps=(*ctx.steps, record),
            llm_calls=(*ctx.llm_calls, *outcome.llm_calls),
            warnings=(*ctx.warnings, *outcome.warnings),
            degradations=(*ctx.degradations, *outcome.degradations),
            stage_ms=(*ctx.stage_ms, *outcome.stages),
        )

    def _failed(
        self, ctx: Context, exc: AgentragError, start: float, span: Span, telemetry: Telemetry
    ) -> Context:
        from opentelemetry.trace import Status, StatusCode

        duration = (time.perf_counter() - start) * 1000.0
        record_error(span, exc, capture_content=telemetry.capture_content)
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        telemetry.instruments.step_errors.add(1, {"step": self.name, "error_type": type(exc).__name__})
        record = StepRecord(self.name, None, duration, None, f"{type(exc).__name__}: {exc}")
        return replace(ctx, error=exc, steps=(*ctx.steps, record), llm_calls=(*ctx.llm_calls, *calls_of(exc)))


class StepRun:
    """One run of a step whose body is driven from outside, e.g. while a reply streams.

    The span ``agentrag.<name>`` starts now but is not made current across the caller's
    yields (use ``with run.current():`` around work that should nest under it); it ends
    with :meth:`finish`, :meth:`fail`, :meth:`skip` or :meth:`abort`. The resulting
    Context is built exactly as :meth:`Step.run` builds it, and the ``after`` hook runs.
    """

    def __init__(self, step: Step, ctx: Context) -> None:
        self.step = step
        self.telemetry = telemetry_of(ctx)
        self.span = self.telemetry.tracer.start_span(
            f"agentrag.{step.name}", record_exception=False, set_status_on_exception=False
        )
        self.start = time.perf_counter()
        self._ended = False

    def __repr__(self) -> str:
        return f"StepRun({self.step.name}{' ended' if self._ended else ''})"

    def current(self) -> Any:
        """A context manager making the step's span current (so model-call spans nest under it)."""
        from opentelemetry import trace

        return trace.use_span(
            self.span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        )

    def skip(self, ctx: Context) -> Context:
        """The context already has an error: mark the span skipped, return ``ctx`` as it is."""
        mark_skipped(self.span, "the context already has an error")
        self._end()
        return self.step._after(ctx)

    def finish(self, ctx: Context, outcome: Outcome) -> Context:
        result = self.step._finish(ctx, outcome, self.start, self.span, self.telemetry)
        self._end()
        return self.step._after(result)

    def fail(self, ctx: Context, exc: AgentragError) -> Context:
        result = self.step._failed(ctx, exc, self.start, self.span, self.telemetry)
        self._end()
        return self.step._after(result)

    def abort(self, exc: BaseException) -> None:
        """The run stopped without a Context (the consumer closed the stream, or a bug raised)."""
        if self._ended:
            return
        if isinstance(exc, Exception):
            from opentelemetry.trace import Status, StatusCode

            record_error(self.span, exc, capture_content=self.telemetry.capture_content)
            self.span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            attributes = {"step": self.step.name, "error_type": type(exc).__name__}
            self.telemetry.instruments.step_errors.add(1, attributes)
        else:
            self.span.set_attribute("agentrag.cancelled", True)
        self._end()

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            elapsed_ms = (time.perf_counter() - self.start) * 1000.0
            self.telemetry.instruments.step_duration.record(elapsed_ms, {"step": self.step.name})
            self.span.end()


class BoundStep:
    """A step with its options, waiting for a Context: ``ctx | search(self_correct=True)``."""

    __slots__ = ("options", "step")

    def __init__(self, step: Step, options: Mapping[str, Any]) -> None:
        self.step = step
        self.options = dict(options)

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"{self.step.name}({opts})"

    def __ror__(self, ctx: Context) -> Context:
        if not isinstance(ctx, Context):
            return NotImplemented
        return self.step.run(ctx, **self.options)

    def __call__(self, ctx: Context) -> Context:
        return self.step.run(ctx, **self.options)

    async def arun(self, ctx: Context) -> Context:
        return await self.step.arun(ctx, **self.options)


def step(name: str, *, asynchronous: AsyncBody | None = None) -> Callable[[Body], Step]:
    """Decorator: ``@step("route")`` over a body ``(ctx, **options) -> Outcome``."""

    def wrap(body: Body) -> Step:
        return Step(name, body, asynchronous)

    return wrap


async def arun(ctx: Context, *steps: BoundStep) -> Context:
    """Run bound steps in order with their async twins: ``await arun(ctx, route(...), search())``."""
    for bound in steps:
        if not isinstance(bound, BoundStep):
            raise TypeError(f"arun() takes bound steps such as search(), got {bound!r}")
        ctx = await bound.arun(ctx)
    return ctx
