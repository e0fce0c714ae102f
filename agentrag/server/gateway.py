"""The one request path of every interface (issue #37).

``/api/v1/query/{tenant}/...`` (search, ask as JSON and as SSE), ``/v1`` (models, chat completions
plain and streaming), ``/mcp`` (over HTTP: every JSON-RPC message; over stdio: ``agentrag mcp``),
the playground (which calls ``/v1`` and ``/api/v1``) and the CLI server commands go through the
same stages, here; each interface is a thin adapter of its protocol around them:

1. **authenticate** (:meth:`Gateway.authenticate`, no I/O): the bearer token verifies (401),
   carries the ``query`` scope (403) and names the tenant (the path's, or for the routes without
   one the token's tenant claim; 403 ``TENANT_MISMATCH``).
2. **admit** (:meth:`Gateway.admit`, one statement): the tenant exists (404), is ACTIVE (403
   ``TENANT_SUSPENDED``) and is under its rate limit (429, ``Retry-After``); the database down is
   503. The REST search and ask run it beside their search when the process is idle
   (:meth:`Gateway.admitted`, :mod:`agentrag.server.speculative`): a refusal still wins. Every
   message is admitted, listings (``GET /v1/models``, MCP ``tools/list``) included. A stream also
   takes a stream slot (:meth:`Gateway.open_stream`): at most ``max_streams`` at once per worker
   (half the in-flight limit, so streams never starve one-shot requests; beyond: 503
   ``OVERLOADED``), released however the stream ends, and ended after ``idle_timeout_s`` without
   an event.
3. **scope** (:class:`Caller`): the tenant and the principal (the token's ``sub`` and groups), the
   same for every interface; named collections are checked (another tenant's is as unknown as a
   missing one, 404); naming none searches every collection the scope may search, and an
   ``acl=True`` one left out for want of a principal is reported (the proof's
   ``skipped_collections``), never refused.
4. **run under a budget** (:meth:`Gateway.context`): the service's :class:`agentrag.Budget`, the
   per-request audit sink.
5. **audit**: the retrieval's events are written before any retrieved text leaves the process
   (:meth:`Gateway.audit`), a stream's outcome (completed, failed, client_disconnected,
   idle_timeout) in a ``finally`` (:class:`Stream`).

Refusals are :class:`Refusal` (an :class:`~agentrag.server.errors.ApiError`: status, code,
message, headers); each adapter turns them into its protocol's error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import agentrag as ar
from agentrag.errors import (
    AgentragError,
    CollectionNotFoundError,
    EmbeddingError,
    EmbeddingMismatchError,
    InvalidInputError,
    ScopeError,
)
from agentrag.server.auth import AuthError, ForbiddenError, Principal, TokenVerifier, authorize
from agentrag.server.errors import (
    RETRIEVAL_RETRY_KINDS,
    ApiError,
    api_error_for,
    database_unavailable,
    safe_message,
)
from agentrag.server.speculative import Speculation
from agentrag.server.streaming import with_outcome

__all__ = ["Caller", "Gateway", "Refusal", "Sink", "Stream", "principal_of"]

_log = logging.getLogger("agentrag.server")
T = TypeVar("T")
Audit = Callable[[list[dict[str, Any]], "float | None"], None]


class Refusal(ApiError):
    """A request refused: ``status`` is the HTTP status it maps to (each protocol answers it its way)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: dict[str, str] | None = None,
        *,
        field: str | None = None,
    ) -> None:
        super().__init__(status, code, message, field=field, headers=headers)


def principal_of(user: str | None, groups: Sequence[str] = ()) -> ar.Principal | None:
    """The principal ``acl=True`` collections check grants against (None: neither user nor group)."""
    return ar.Principal(user=user, groups=list(groups)) if user or groups else None


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a request runs for, once admitted: the tenant (None: a store without tenants, over
    stdio), its settings, and the principal."""

    tenant: str | None
    principal: ar.Principal | None = None
    top_k_max: int = 50
    generation_enabled: bool = True
    suppress_ungrounded: bool = False

    @property
    def scope(self) -> ar.Scope | None:
        if self.tenant is None and self.principal is None:
            return None
        return ar.Scope(tenant=self.tenant, principal=self.principal)


class Sink:
    """The per-request audit sink: events as dicts (ids and counts only)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: Any) -> None:
        self.events.append(event.to_dict())


def _log_audit(events: list[dict[str, Any]], latency_ms: float | None) -> None:
    """Without the service's audit writer (stdio): the ``agentrag.audit`` logger, as the library's
    default sink writes (ids and counts, never text)."""
    import json

    for event in events:
        logging.getLogger("agentrag.audit").info(json.dumps(event, default=str, ensure_ascii=False))


class Gateway:
    """The request path (see the module docstring). ``verifier`` / ``admit`` are None over stdio
    (the process's one caller is trusted: :meth:`local`)."""

    def __init__(
        self,
        store: ar.Store,
        *,
        verifier: TokenVerifier | None = None,
        admit: Any = None,
        audit: Audit | None = None,
        offer: Callable[[list[dict[str, Any]]], None] | None = None,
        telemetry: ar.Telemetry | None = None,
        budget: ar.Budget | None = None,
        default_collections: Sequence[str] | None = None,
        max_streams: int = 500,
        idle_timeout_s: float = 60.0,
        idle: Callable[[], bool] | None = None,
    ) -> None:
        self.store, self.verifier, self.admitter = store, verifier, admit
        self.write = audit or _log_audit
        self.offer = offer or (lambda events: self.write(events, None))
        self.telemetry, self.budget = telemetry, budget
        self.default_collections = list(default_collections) if default_collections else None
        self.max_streams, self.idle_timeout_s = max(1, max_streams), idle_timeout_s
        self.streams = 0  # streams open now (on the event loop: no lock)
        # idle(): no other request in flight
        self.speculation = Speculation(self.admit, leased=self.leased, idle=idle)

    # ---- 1. authenticate --------------------------------------------------------------------------
    def authenticate(self, authorization: str | None, tenant: str | None = None) -> Principal:
        """The token's principal for ``tenant`` (None: the token's own tenant claim); no I/O."""
        if self.verifier is None:
            raise Refusal(401, "UNAUTHENTICATED", "authentication is not configured")
        try:
            if tenant is None:
                tenant = self._claimed_tenant(authorization)
            return authorize(self.verifier, authorization, tenant)
        except AuthError as exc:
            raise Refusal(401, "UNAUTHENTICATED", str(exc), {"WWW-Authenticate": "Bearer"}) from None
        except ForbiddenError as exc:
            raise Refusal(403, exc.code, str(exc)) from None

    def _claimed_tenant(self, authorization: str | None) -> str:
        assert self.verifier is not None
        if not authorization:
            raise AuthError("missing bearer token")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError("expected 'Authorization: Bearer <token>'")
        claimed = self.verifier.verify(token.strip()).get(self.verifier.config.jwt_tenant_claim)
        if not isinstance(claimed, str) or not claimed:
            raise ForbiddenError("TENANT_MISMATCH", "the token names no tenant")
        return claimed

    # ---- 2. admit ---------------------------------------------------------------------------------
    def admit(self, who: Principal, *, lease: bool = True) -> Caller:
        """The admitted :class:`Caller` of an authenticated principal: a slot an earlier statement took
        ahead (:mod:`agentrag.server.leases`), else one statement (a worker thread). ``lease=False``:
        the statement, always."""
        try:
            admission = self.admitter(who.tenant, lease=lease)
        except Exception as exc:  # the database is down: 503, Retry-After
            raise (api_error_for(exc) or exc) from None
        return self._caller(who, admission)

    def leased(self, who: Principal) -> Caller | None:
        """The admitted :class:`Caller` from a slot of the tenant's lease, without a statement (None:
        no slot left, or an admitter without leases)."""
        leases = getattr(self.admitter, "leases", None)
        admission = leases.take(who.tenant) if leases is not None else None
        return None if admission is None else self._caller(who, admission)

    def _caller(self, who: Principal, admission: Any) -> Caller:
        tenant = admission.tenant
        if tenant is None:
            raise Refusal(404, "TENANT_NOT_FOUND", "no such tenant")
        if not tenant.active:
            raise Refusal(403, "TENANT_SUSPENDED", "the tenant is suspended")
        if not admission.allowed:
            retry = str(max(1, math.ceil(admission.retry_after_s)))
            raise Refusal(429, "RATE_LIMITED", "rate limit exceeded; retry later", {"Retry-After": retry})
        return Caller(
            tenant.id,
            principal_of(who.subject, who.groups),
            top_k_max=tenant.retrieval_top_k_max,
            generation_enabled=tenant.generation_enabled,
            suppress_ungrounded=tenant.suppress_ungrounded,
        )

    def admitted(self, who: Principal, work: Callable[[Caller], T]) -> tuple[Caller, T]:
        """Admit ``who`` and run ``work(caller)`` (a worker thread): the admission beside the work when
        this process is idle and the tenant was admitted here recently, else first; a refusal is
        raised whatever the work did (:mod:`agentrag.server.speculative`)."""
        return self.speculation.admitted(who, work)

    def enter(self, authorization: str | None, tenant: str | None = None) -> Caller:
        """Authenticate, then admit (a worker thread)."""
        return self.admit(self.authenticate(authorization, tenant))

    @staticmethod
    def local(tenant: str | None, user: str | None = None, groups: Sequence[str] = ()) -> Caller:
        """The one caller of a local process (``agentrag mcp`` over stdio): no token, no admission."""
        return Caller(tenant, principal_of(user, groups))

    def open_stream(self) -> None:
        """Take a stream slot (on the event loop), or 503 ``OVERLOADED``: released by the
        :class:`Stream` made next (:meth:`release_stream` when none is made)."""
        if self.streams >= self.max_streams:
            raise Refusal(
                503, "OVERLOADED", "the server is at its stream limit; retry later", {"Retry-After": "1"}
            )
        self.streams += 1

    # ---- 3. scope, 4. run under a budget ---------------------------------------------------------
    def check(self, caller: Caller, *, top_k: int, generate: bool) -> None:
        if top_k > caller.top_k_max:
            raise Refusal(422, "VALIDATION_ERROR", f"top_k is at most {caller.top_k_max}", field="top_k")
        if generate and not caller.generation_enabled:
            raise Refusal(403, "GENERATION_DISABLED", "answer generation is disabled for this tenant")

    def collections(self, caller: Caller, names: Sequence[str] | None) -> list[str] | None:
        """The collections to search: the named ones (or the default ones) once checked, else None
        (every collection the caller's scope may search; the library reports what it skipped)."""
        names = list(names or ()) or self.default_collections
        if not names:
            return None
        try:  # another tenant's collection is as unknown as a missing one
            owners = {c.tenant for c in self.store.describe(names, max_age=5.0)}
        except CollectionNotFoundError:
            owners = {""}
        if owners - {None, caller.tenant}:
            raise Refusal(404, "COLLECTION_NOT_FOUND", "unknown collection", field="collections")
        return names

    def visible(self, caller: Caller) -> list[Any]:
        """The collections the caller's tenant may name: its own and the shared ones."""
        return [c for c in self.store.collections() if c.tenant in (None, caller.tenant)]

    def context(
        self,
        caller: Caller,
        question: str,
        sink: Sink,
        *,
        collections: Sequence[str] | None,
        llm: Any = None,
        top_k: int = 5,
        mode: str = "hybrid",
        filters: Mapping[str, Any] | None = None,
        history: Sequence[Mapping[str, str]] = (),
    ) -> ar.Context:
        """The request's Context in the caller's scope, under the service's budget."""
        try:
            return ar.new(
                question,
                history=list(history) or None,
                store=self.store,
                llm=llm,
                telemetry=self.telemetry,
                audit=sink,
                budget=self.budget,
                limit=top_k,
                collections=list(collections) if collections else None,
                mode=mode,
                scope=caller.scope,
                filters=dict(filters) if filters else None,
            )
        except InvalidInputError as exc:
            raise Refusal(422, "VALIDATION_ERROR", safe_message(exc), field=_field_of(exc)) from None

    def search(
        self, ctx: ar.Context, sink: Sink, *, top_k: int, condense: bool = False, cut: bool = True
    ) -> ar.Context:
        """``(condense) -> search`` (``condense``: the request came with a conversation); a failure is
        audited (outcome failed) and raised as its refusal. ``cut``: over several collections, the
        ranking is cut to ``top_k`` in all (a result list); a chat turn's answer weighs every hit
        the searches returned (all audited as retrieved), as the library's chat pipeline does."""
        try:
            if condense:
                ctx = ctx | ar.condense()
            ctx = ctx | ar.search()
        except ScopeError:  # a named acl=True collection and a token naming no user or group
            raise Refusal(
                403, "NO_PRINCIPAL", "the token names no user (sub) or groups: a collection enforces grants"
            ) from None
        except InvalidInputError:  # the only one left: nothing at all to search
            raise Refusal(404, "COLLECTION_NOT_FOUND", "there are no collections to search") from None
        if cut and len({r.collection for r in ctx.results}) > 1:  # top_k is the total, not per collection
            ctx = dataclasses.replace(ctx, ranked=ctx.hits[:top_k])
        if ctx.error is not None and (mapped := api_error_for(ctx.error)) is not None:
            self.write(with_outcome(sink.events, "failed"), None)  # the budget ran out (504)
            raise mapped
        if ctx.results and all(r.error for r in ctx.results):
            kinds = {r.error.split(":", 1)[0] for r in ctx.results if r.error}
            self.write(with_outcome(sink.events, "failed"), None)
            _log.warning("retrieval failed: %s", ", ".join(sorted(kinds)))
            if kinds <= RETRIEVAL_RETRY_KINDS:
                raise database_unavailable()
            embedding = {EmbeddingError.__name__, EmbeddingMismatchError.__name__}
            code = "EMBEDDING_FAILED" if kinds & embedding else "RETRIEVAL_FAILED"
            raise Refusal(500, code, "retrieval failed")
        return ctx

    def answer(self, ctx: ar.Context, sink: Sink, caller: Caller) -> ar.Context:
        """The cite-only answer; a failure is audited (outcome failed) and raised as its refusal."""
        ctx = ctx | ar.answer(suppress_ungrounded=caller.suppress_ungrounded)
        if ctx.error is not None:
            self.write(with_outcome(sink.events, "failed"), None)
            raise api_error_for(ctx.error) or Refusal(500, "GENERATION_FAILED", "answer generation failed")
        return ctx

    # ---- 5. audit -----------------------------------------------------------------------------------
    def audit(self, sink: Sink, started: float | None = None) -> None:
        """Write the request's events (before its data leaves), with its latency when it is done."""
        latency = None if started is None else (time.perf_counter() - started) * 1000.0
        self.write(sink.events, latency)

    def audit_streaming(self, sink: Sink) -> None:
        """Write a stream's retrieval events (outcome ``streaming``) before its first byte."""
        self.write(with_outcome(sink.events, "streaming"), None)
        sink.events.clear()

    def stream(
        self, ctx: ar.Context, body: Callable[[Stream], AsyncIterator[bytes]], *, idle_event: bytes
    ) -> Stream:
        """The body of a streamed answer, holding the slot :meth:`open_stream` took."""
        return Stream(self, ctx, body, idle_event=idle_event)

    def release_stream(self) -> None:
        self.streams -= 1

    def stream_ended(self, ctx: ar.Context, outcome: str) -> None:
        scope = ctx.options.scope
        event: dict[str, Any] = {"type": "REQUEST_OUTCOME", "query_id": ctx.query_id}
        event.update(tenant=scope.tenant if scope else None, details={"outcome": outcome})
        try:
            self.offer([event])
        except Exception as exc:  # bookkeeping never fails the stream's end
            _log.warning("stream outcome audit failed: %s", type(exc).__name__)


class Stream:
    """A streamed body that holds a stream slot: each event must come within the idle timeout (else
    ``idle_event`` is sent and the stream ends), the outcome is audited and the slot released
    however it ends (completed, failed, the client gone: ``client_disconnected``), also when the
    body never started. ``body(stream)`` calls :meth:`fail` on its error path."""

    def __init__(
        self,
        gateway: Gateway,
        ctx: ar.Context,
        body: Callable[[Stream], AsyncIterator[bytes]],
        *,
        idle_event: bytes,
    ) -> None:
        self.gateway, self.ctx, self.idle_event = gateway, ctx, idle_event
        self.body = body(self)
        self.outcome = "client_disconnected"
        self.closed = self.ending = False

    def fail(self) -> None:
        self.outcome = "failed"

    def __aiter__(self) -> Stream:
        return self

    async def __anext__(self) -> bytes:
        if self.ending or self.closed:
            await self.aclose()
            raise StopAsyncIteration
        try:
            async with asyncio.timeout(self.gateway.idle_timeout_s):
                return await anext(self.body)
        except StopAsyncIteration:
            if self.outcome != "failed":
                self.outcome = "completed"
            await self.aclose()
            raise
        except TimeoutError:
            _log.warning("stream idle for %.0f s: ended", self.gateway.idle_timeout_s)
            self.outcome, self.ending = "idle_timeout", True
            return self.idle_event

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            await self.body.aclose()  # type: ignore[attr-defined]
        except Exception as exc:  # an abandoned generator's own cleanup never fails the release
            _log.debug("stream body close: %s", type(exc).__name__)
        finally:
            self.gateway.release_stream()
            self.gateway.stream_ended(self.ctx, self.outcome)


def _field_of(exc: AgentragError) -> str | None:
    from agentrag.errors import EmptyQueryError, FilterError

    if isinstance(exc, FilterError):
        return "filters"
    if isinstance(exc, EmptyQueryError):
        return "query_text"
    return None
