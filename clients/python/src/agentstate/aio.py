"""The asyncio client: :class:`AsyncClient`, on grpc.aio.

The same calls, results and exceptions as :class:`agentstate.Client`, as
coroutines. Concurrent appends of one AsyncClient share one AppendBatches
stream. Create, use and close it on one event loop.
"""

from __future__ import annotations

import time
from typing import Any, AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Optional, TypeVar, Union

import grpc
import grpc.aio

from agentstate import build, errors
from agentstate import retry as retries
from agentstate.aio_batch import AsyncBatchAppender
from agentstate.batch import DEFAULT_LINGER
from agentstate.audit.v1 import audit_pb2, audit_pb2_grpc
from agentstate.client import DEFAULT_TIMEOUT
from agentstate.connection import TLSArg, auth_metadata, open_aio_channel, tls_settings
from agentstate.plan.v1 import plan_pb2, plan_pb2_grpc
from agentstate.retry import RetryPolicy
from agentstate.session.v1 import session_pb2, session_pb2_grpc

T = TypeVar("T")
Enum = Union[str, int, None]
_UNSET: Any = object()


class _Core:
    def __init__(self, channel: grpc.aio.Channel, token: Optional[str], timeout: Optional[float], policy: RetryPolicy) -> None:
        self.channel = channel
        self.metadata = auth_metadata(token)
        self.timeout = timeout
        self.policy = policy
        self.sessions = session_pb2_grpc.SessionServiceStub(channel)
        self.plans = plan_pb2_grpc.PlanServiceStub(channel)
        self.audit = audit_pb2_grpc.AuditServiceStub(channel)

    def deadline(self, timeout: Optional[float]) -> Optional[float]:
        t = self.timeout if timeout is _UNSET else timeout
        return None if t is None else time.monotonic() + t

    async def unary(self, method: Callable[..., Awaitable[T]], req: Any, timeout: Optional[float], idempotent: bool, write: bool = True) -> T:
        async def attempt(left: Optional[float]) -> T:
            try:
                return await method(req, timeout=left, metadata=self.metadata)
            except grpc.aio.AioRpcError as e:
                err = errors.from_rpc_error(e)
                raise (errors.for_write(err) if write else err) from None

        return await retries.call_async(self.policy, attempt, self.deadline(timeout), idempotent)


class AsyncSessions:
    """Sessions, as coroutines; see :class:`agentstate.client.Sessions`."""

    def __init__(self, core: _Core, batched: bool, linger: float = DEFAULT_LINGER) -> None:
        self._core = core
        # Append over an encoded request, for appends too large for a batch.
        self._append_encoded = core.channel.unary_unary(
            "/agentstate.session.v1.SessionService/Append",
            request_serializer=None,
            response_deserializer=session_pb2.AppendResponse.FromString,
        )
        self._batch = (
            AsyncBatchAppender(core.channel, core.metadata, self._append_encoded_once, linger) if batched else None
        )

    @property
    def appender(self) -> Optional[AsyncBatchAppender]:
        """The shared AppendBatches stream's appender (None without batched appends); its
        batches_sent, appends_sent and streams_opened count what it did."""
        return self._batch

    async def create(
        self,
        actor_name: str,
        *,
        session_id: Optional[str] = None,
        namespace: str = "",
        automation: str = "",
        metadata: build.JSONObject = None,
        timeout: Optional[float] = _UNSET,
    ) -> session_pb2.CreateSessionResponse:
        req = build.create_session_request(actor_name, session_id, namespace, automation, metadata)
        return await self._core.unary(self._core.sessions.Create, req, timeout, True)

    async def get(self, session_id: str, *, timeout: Optional[float] = _UNSET) -> session_pb2.Session:
        req = session_pb2.GetSessionRequest(session_id=session_id)
        return (await self._core.unary(self._core.sessions.Get, req, timeout, True, write=False)).session

    async def close(self, session_id: str, *, timeout: Optional[float] = _UNSET) -> session_pb2.Session:
        req = session_pb2.CloseSessionRequest(session_id=session_id)
        return (await self._core.unary(self._core.sessions.Close, req, timeout, False)).session

    async def append(
        self,
        session_id: str,
        messages: Iterable[build.MessageLike],
        *,
        timeout: Optional[float] = _UNSET,
    ) -> session_pb2.AppendResponse:
        """Appends one turn atomically; message ids are filled in before the first attempt."""
        if self._batch is not None:
            # Encoded once (see Sessions.append): every attempt sends the same bytes.
            data = build.encoded_append_request(session_id, messages)
            return await self._append_batched(data, timeout, True)
        req = build.append_request(session_id, messages)
        return await self._append(req, timeout, True)

    async def append_request(
        self, req: session_pb2.AppendRequest, *, timeout: Optional[float] = _UNSET
    ) -> session_pb2.AppendResponse:
        """Appends a ready AppendRequest as is; without message ids it is not retried on OUTCOME_UNKNOWN."""
        idempotent = all(m.message_id for m in req.messages)
        if self._batch is not None:
            return await self._append_batched(req.SerializeToString(), timeout, idempotent)
        return await self._append(req, timeout, idempotent)

    async def _append(
        self, req: session_pb2.AppendRequest, timeout: Optional[float], idempotent: bool
    ) -> session_pb2.AppendResponse:
        once = self._append_unary_once
        return await retries.call_async(self._core.policy, lambda left: once(req, left), self._core.deadline(timeout), idempotent)

    async def _append_batched(self, data: bytes, timeout: Optional[float], idempotent: bool) -> session_pb2.AppendResponse:
        assert self._batch is not None
        once = self._batch.append
        return await retries.call_async(self._core.policy, lambda left: once(data, left), self._core.deadline(timeout), idempotent)

    async def _append_encoded_once(self, data: bytes, timeout: Optional[float]) -> session_pb2.AppendResponse:
        try:
            return await self._append_encoded(data, timeout=timeout, metadata=self._core.metadata)
        except grpc.aio.AioRpcError as e:
            raise errors.from_rpc_error(e) from None

    async def _append_unary_once(
        self, req: session_pb2.AppendRequest, timeout: Optional[float]
    ) -> session_pb2.AppendResponse:
        try:
            return await self._core.sessions.Append(req, timeout=timeout, metadata=self._core.metadata)
        except grpc.aio.AioRpcError as e:
            raise errors.from_rpc_error(e) from None

    async def list_messages(
        self, session_id: str, *, from_sequence: int = 0, limit: int = 0, timeout: Optional[float] = _UNSET
    ) -> session_pb2.ListMessagesResponse:
        req = session_pb2.ListMessagesRequest(session_id=session_id, from_sequence=from_sequence, limit=limit)
        return await self._core.unary(self._core.sessions.ListMessages, req, timeout, True, write=False)

    async def export(self, session_id: str, *, timeout: Optional[float] = _UNSET) -> session_pb2.ExportSessionResponse:
        req = session_pb2.ExportSessionRequest(session_id=session_id)
        return await self._core.unary(self._core.sessions.Export, req, timeout, True, write=False)

    async def import_session(self, data: str, *, timeout: Optional[float] = _UNSET) -> session_pb2.ImportSessionResponse:
        req = session_pb2.ImportSessionRequest(data=data)
        return await self._core.unary(self._core.sessions.Import, req, timeout, False)

    async def list(
        self,
        *,
        actor_name: str = "",
        namespace: str = "",
        state: Enum = None,
        limit: int = 0,
        cursor: str = "",
        timeout: Optional[float] = _UNSET,
    ) -> session_pb2.ListSessionsResponse:
        req = session_pb2.ListSessionsRequest(
            actor_name=actor_name,
            namespace=namespace,
            state=build.enum_value(session_pb2.SessionState, "SESSION_STATE_", state),
            limit=limit,
            cursor=cursor,
        )
        return await self._core.unary(self._core.sessions.List, req, timeout, True, write=False)

    async def delete(self, session_id: str, *, timeout: Optional[float] = _UNSET) -> session_pb2.DeleteSessionResponse:
        req = session_pb2.DeleteSessionRequest(session_id=session_id)
        return await self._core.unary(self._core.sessions.Delete, req, timeout, False)

    async def update_token_usage(
        self,
        session_id: str,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float = 0.0,
        timeout: Optional[float] = _UNSET,
    ) -> session_pb2.TokenUsage:
        req = session_pb2.UpdateTokenUsageRequest(
            session_id=session_id, input_tokens=input_tokens, output_tokens=output_tokens, cost=cost
        )
        return (await self._core.unary(self._core.sessions.UpdateTokenUsage, req, timeout, False)).total

    async def link_plan(
        self, session_id: str, plan_id: str, *, phase: str = "", state: str = "", timeout: Optional[float] = _UNSET
    ) -> session_pb2.Session:
        req = session_pb2.LinkPlanRequest(
            session_id=session_id, plan=session_pb2.LinkedPlan(plan_id=plan_id, phase=phase, state=state)
        )
        return (await self._core.unary(self._core.sessions.LinkPlan, req, timeout, True)).session

    async def export_stream(
        self, session_id: str, *, timeout: Optional[float] = _UNSET
    ) -> AsyncIterator[session_pb2.ExportChunk]:
        """An export of any size, chunk by chunk; not retried (see Sessions.export_stream)."""
        req = session_pb2.ExportSessionRequest(session_id=session_id)
        t = self._core.timeout if timeout is _UNSET else timeout
        try:
            async for chunk in self._core.sessions.ExportStream(req, timeout=t, metadata=self._core.metadata):
                yield chunk
        except grpc.aio.AioRpcError as e:
            raise errors.from_rpc_error(e) from None

    async def import_stream(
        self,
        chunks: Union[
            Iterable[Union[session_pb2.ImportChunk, session_pb2.ExportChunk]],
            AsyncIterable[Union[session_pb2.ImportChunk, session_pb2.ExportChunk]],
        ],
        *,
        timeout: Optional[float] = _UNSET,
    ) -> session_pb2.ImportSessionResponse:
        """Imports an export of any size as a new session; not retried (see Sessions.import_stream)."""

        def convert(c: Union[session_pb2.ImportChunk, session_pb2.ExportChunk]) -> session_pb2.ImportChunk:
            # ExportChunk and ImportChunk have the same fields and numbers.
            return c if isinstance(c, session_pb2.ImportChunk) else session_pb2.ImportChunk.FromString(c.SerializeToString())

        async def requests() -> AsyncIterator[session_pb2.ImportChunk]:
            if hasattr(chunks, "__aiter__"):
                async for c in chunks:  # type: ignore[union-attr]
                    yield convert(c)
            else:
                for c in chunks:  # type: ignore[union-attr]
                    yield convert(c)

        t = self._core.timeout if timeout is _UNSET else timeout
        try:
            return await self._core.sessions.ImportStream(requests(), timeout=t, metadata=self._core.metadata)
        except grpc.aio.AioRpcError as e:
            raise errors.from_rpc_error(e) from None

    async def _close(self) -> None:
        if self._batch is not None:
            await self._batch.close()


class AsyncPlans:
    """Plans, as coroutines; see :class:`agentstate.client.Plans`."""

    def __init__(self, core: _Core) -> None:
        self._core = core

    async def record_error(
        self,
        plan_id: str,
        *,
        phase: Enum = None,
        step_id: str = "",
        error_type: str = "",
        message: str = "",
        tool: str = "",
        actor_name: str = "",
        stack_summary: str = "",
        attributes: build.JSONObject = None,
        record_id: Optional[str] = None,
        timeout: Optional[float] = _UNSET,
    ) -> plan_pb2.RecordErrorResponse:
        req = build.record_error_request(
            plan_id, phase, step_id, error_type, message, tool, actor_name, stack_summary, attributes, record_id
        )
        return await self._core.unary(self._core.plans.RecordError, req, timeout, True)

    async def history(
        self,
        plan_id: str,
        *,
        phase: Enum = None,
        category: Enum = None,
        from_sequence: int = 0,
        limit: int = 0,
        timeout: Optional[float] = _UNSET,
    ) -> plan_pb2.HistoryResponse:
        req = build.history_request(plan_id, phase, category, from_sequence, limit)
        return await self._core.unary(self._core.plans.History, req, timeout, True, write=False)

    async def error_details(self, plan_id: str, *, timeout: Optional[float] = _UNSET) -> plan_pb2.ErrorDetailsResponse:
        req = plan_pb2.ErrorDetailsRequest(plan_id=plan_id)
        return await self._core.unary(self._core.plans.ErrorDetails, req, timeout, True, write=False)


    async def set_policy(self, plan_id: str, max_retries: int, *, timeout: Optional[float] = _UNSET) -> plan_pb2.SetPolicyResponse:
        req = plan_pb2.SetPolicyRequest(plan_id=plan_id, max_retries=max_retries)
        return await self._core.unary(self._core.plans.SetPolicy, req, timeout, True)

    async def record_success(
        self, plan_id: str, *, phase: Enum = None, step_id: str = "", timeout: Optional[float] = _UNSET
    ) -> plan_pb2.RecordSuccessResponse:
        req = plan_pb2.RecordSuccessRequest(
            plan_id=plan_id, phase=build.enum_value(plan_pb2.Phase, "PHASE_", phase), step_id=step_id
        )
        return await self._core.unary(self._core.plans.RecordSuccess, req, timeout, False)

    async def merge_error_details(
        self, plan_id: str, details: build.JSONObject, *, timeout: Optional[float] = _UNSET
    ) -> plan_pb2.MergeErrorDetailsResponse:
        req = plan_pb2.MergeErrorDetailsRequest(plan_id=plan_id, details_json=build.json_object(details, "details"))
        return await self._core.unary(self._core.plans.MergeErrorDetails, req, timeout, True)


class AsyncAudit:
    """The audit trail, as coroutines; see :class:`agentstate.client.Audit`."""

    def __init__(self, core: _Core) -> None:
        self._core = core

    async def record(
        self,
        event_type: str,
        *,
        plan_id: str = "",
        session_id: str = "",
        project_name: str = "",
        actor_name: str = "",
        user_identity: str = "",
        details: build.JSONObject = None,
        sync: bool = False,
        event_id: Optional[str] = None,
        timeout: Optional[float] = _UNSET,
    ) -> audit_pb2.RecordResponse:
        req = build.audit_record_request(
            event_type, plan_id, session_id, project_name, actor_name, user_identity, details, sync, event_id
        )
        return await self._core.unary(self._core.audit.Record, req, timeout, True)

    async def list(
        self,
        *,
        filter: Optional[audit_pb2.Filter] = None,
        after_event_id: str = "",
        limit: int = 0,
        timeout: Optional[float] = _UNSET,
    ) -> audit_pb2.ListResponse:
        req = audit_pb2.ListRequest(filter=filter, after_event_id=after_event_id, limit=limit)
        return await self._core.unary(self._core.audit.List, req, timeout, True, write=False)

    async def count(self, *, filter: Optional[audit_pb2.Filter] = None, timeout: Optional[float] = _UNSET) -> int:
        req = audit_pb2.CountRequest(filter=filter)
        return (await self._core.unary(self._core.audit.Count, req, timeout, True, write=False)).count

    async def get(self, event_id: str, *, timeout: Optional[float] = _UNSET) -> audit_pb2.AuditEntry:
        req = audit_pb2.GetRequest(event_id=event_id)
        return (await self._core.unary(self._core.audit.Get, req, timeout, True, write=False)).entry

    async def verify(self, *, timeout: Optional[float] = _UNSET) -> audit_pb2.VerifyResponse:
        return await self._core.unary(self._core.audit.Verify, audit_pb2.VerifyRequest(), timeout, True, write=False)

    async def flush(self, *, timeout: Optional[float] = _UNSET) -> None:
        await self._core.unary(self._core.audit.Flush, audit_pb2.FlushRequest(), timeout, True, write=False)


class AsyncClient:
    """An asyncio agentstate client; arguments as :class:`agentstate.Client`.

    Use ``async with AsyncClient(...) as c:`` or ``await c.close()``.
    """

    def __init__(
        self,
        target: str,
        *,
        token: Optional[str] = None,
        tls: TLSArg = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        retry: RetryPolicy = RetryPolicy(),
        batched_appends: bool = True,
        append_linger: float = DEFAULT_LINGER,
        options: Iterable[Any] = (),
    ) -> None:
        self.channel = open_aio_channel(target, tls_settings(tls), options)
        core = _Core(self.channel, token, timeout, retry)
        self.sessions = AsyncSessions(core, batched_appends, append_linger)
        self.plans = AsyncPlans(core)
        self.audit = AsyncAudit(core)

    async def close(self) -> None:
        """Ends the append stream once the appends sent are answered, then closes the channel."""
        await self.sessions._close()
        await self.channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
