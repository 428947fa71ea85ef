"""The asyncio client: :class:`AsyncClient`, on grpc.aio.

The same calls, results and exceptions as :class:`agentstate.Client`, as
coroutines. Concurrent appends of one AsyncClient share one AppendBatches
stream. Create, use and close it on one event loop.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from agentstate import build
from agentstate.aio_sessions import AsyncSessions
from agentstate.appends import DEFAULT_LINGER
from agentstate.audit.v1 import audit_pb2
from agentstate.connection import TLSArg, open_aio_channel, tls_settings
from agentstate.core import DEFAULT_TIMEOUT, UNSET, AsyncCore, Enum
from agentstate.plan.v1 import plan_pb2
from agentstate.retry import RetryPolicy

__all__ = ["AsyncAudit", "AsyncClient", "AsyncPlans", "AsyncSessions"]

_UNSET = UNSET


class AsyncPlans:
    """Plans, as coroutines; see :class:`agentstate.client.Plans`."""

    def __init__(self, core: AsyncCore) -> None:
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
        namespace: str = "",
        timeout: Optional[float] = _UNSET,
    ) -> plan_pb2.RecordErrorResponse:
        req = build.record_error_request(
            plan_id, phase, step_id, error_type, message, tool, actor_name, stack_summary, attributes, record_id
        )
        req.namespace = namespace
        return await self._core.unary(self._core.plans.RecordError, req, timeout, True)

    async def history(
        self,
        plan_id: str,
        *,
        phase: Enum = None,
        category: Enum = None,
        from_sequence: int = 0,
        limit: int = 0,
        namespace: str = "",
        timeout: Optional[float] = _UNSET,
    ) -> plan_pb2.HistoryResponse:
        req = build.history_request(plan_id, phase, category, from_sequence, limit)
        req.namespace = namespace
        return await self._core.unary(self._core.plans.History, req, timeout, True, write=False)

    async def error_details(
        self, plan_id: str, *, namespace: str = "", timeout: Optional[float] = _UNSET
    ) -> plan_pb2.ErrorDetailsResponse:
        req = plan_pb2.ErrorDetailsRequest(plan_id=plan_id, namespace=namespace)
        return await self._core.unary(self._core.plans.ErrorDetails, req, timeout, True, write=False)


    async def set_policy(
        self, plan_id: str, max_retries: int, *, namespace: str = "", timeout: Optional[float] = _UNSET
    ) -> plan_pb2.SetPolicyResponse:
        req = plan_pb2.SetPolicyRequest(plan_id=plan_id, max_retries=max_retries, namespace=namespace)
        return await self._core.unary(self._core.plans.SetPolicy, req, timeout, True)

    async def record_success(
        self,
        plan_id: str,
        *,
        phase: Enum = None,
        step_id: str = "",
        namespace: str = "",
        timeout: Optional[float] = _UNSET,
    ) -> plan_pb2.RecordSuccessResponse:
        req = plan_pb2.RecordSuccessRequest(
            plan_id=plan_id,
            phase=build.enum_value(plan_pb2.Phase, "PHASE_", phase),
            step_id=step_id,
            namespace=namespace,
        )
        return await self._core.unary(self._core.plans.RecordSuccess, req, timeout, False)

    async def merge_error_details(
        self, plan_id: str, details: build.JSONObject, *, namespace: str = "", timeout: Optional[float] = _UNSET
    ) -> plan_pb2.MergeErrorDetailsResponse:
        req = plan_pb2.MergeErrorDetailsRequest(
            plan_id=plan_id, details_json=build.json_object(details, "details"), namespace=namespace
        )
        return await self._core.unary(self._core.plans.MergeErrorDetails, req, timeout, True)


class AsyncAudit:
    """The audit trail, as coroutines; see :class:`agentstate.client.Audit`."""

    def __init__(self, core: AsyncCore) -> None:
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
        core = AsyncCore(self.channel, token, timeout, retry)
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
