"""The blocking client: :class:`Client` and its sessions, plans and audit parts.

Results are the generated protobuf messages of ``agentstate.<x>.v1`` (typed
by their .pyi stubs); failures are :mod:`agentstate.errors` exceptions.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional

from agentstate import build
from agentstate.appends import DEFAULT_LINGER
from agentstate.audit.v1 import audit_pb2
from agentstate.connection import TLSArg, open_aio_channel, open_channel, tls_settings
from agentstate.core import DEFAULT_TIMEOUT, UNSET, Core, Enum
from agentstate.plan.v1 import plan_pb2
from agentstate.retry import RetryPolicy
from agentstate.sessions import Sessions

__all__ = ["Audit", "Client", "DEFAULT_TIMEOUT", "Plans", "Sessions"]

_UNSET = UNSET


class Plans:
    """Plans: per-plan error histories, retry accounting and recovery advice.

    A plan is (namespace, plan_id): every method takes ``namespace=``, empty
    for the default namespace "local", and the same plan_id in another
    namespace is another plan.
    """

    def __init__(self, core: Core) -> None:
        self._core = core

    def record_error(
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
        """Records an error; phase is a name ("execute") or plan_pb2.Phase.

        record_id (a new ULID unless given) makes retries safe: a record id
        stored already answers the stored record with duplicate=True.
        """
        req = build.record_error_request(
            plan_id, phase, step_id, error_type, message, tool, actor_name, stack_summary, attributes, record_id
        )
        req.namespace = namespace
        return self._core.unary(self._core.plans.RecordError, req, timeout, True)

    def set_policy(
        self, plan_id: str, max_retries: int, *, namespace: str = "", timeout: Optional[float] = _UNSET
    ) -> plan_pb2.SetPolicyResponse:
        req = plan_pb2.SetPolicyRequest(plan_id=plan_id, max_retries=max_retries, namespace=namespace)
        return self._core.unary(self._core.plans.SetPolicy, req, timeout, True)

    def record_success(
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
        return self._core.unary(self._core.plans.RecordSuccess, req, timeout, False)

    def history(
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
        """One page of the plan's error records (next_sequence is -1 after the last)."""
        req = build.history_request(plan_id, phase, category, from_sequence, limit)
        req.namespace = namespace
        return self._core.unary(self._core.plans.History, req, timeout, True, write=False)

    def error_details(
        self, plan_id: str, *, namespace: str = "", timeout: Optional[float] = _UNSET
    ) -> plan_pb2.ErrorDetailsResponse:
        req = plan_pb2.ErrorDetailsRequest(plan_id=plan_id, namespace=namespace)
        return self._core.unary(self._core.plans.ErrorDetails, req, timeout, True, write=False)

    def merge_error_details(
        self, plan_id: str, details: build.JSONObject, *, namespace: str = "", timeout: Optional[float] = _UNSET
    ) -> plan_pb2.MergeErrorDetailsResponse:
        req = plan_pb2.MergeErrorDetailsRequest(
            plan_id=plan_id, details_json=build.json_object(details, "details"), namespace=namespace
        )
        return self._core.unary(self._core.plans.MergeErrorDetails, req, timeout, True)


class Audit:
    """The hash-chained audit trail."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def record(
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
        """Records an entry; sync=True answers once it is committed (durable=True).

        The entry carries a client id (event_id, a new ULID unless given), so
        a retry after OUTCOME_UNKNOWN is safe: the node answers a stored
        entry with duplicate=True and stores nothing.
        """
        req = build.audit_record_request(
            event_type, plan_id, session_id, project_name, actor_name, user_identity, details, sync, event_id
        )
        return self._core.unary(self._core.audit.Record, req, timeout, True)

    def list(
        self,
        *,
        filter: Optional[audit_pb2.Filter] = None,
        after_event_id: str = "",
        limit: int = 0,
        timeout: Optional[float] = _UNSET,
    ) -> audit_pb2.ListResponse:
        """One page of entries in commit order; build filters with agentstate.audit_filter."""
        req = audit_pb2.ListRequest(filter=filter, after_event_id=after_event_id, limit=limit)
        return self._core.unary(self._core.audit.List, req, timeout, True, write=False)

    def iter(self, *, filter: Optional[audit_pb2.Filter] = None, page: int = 1000) -> Iterator[audit_pb2.AuditEntry]:
        """Every entry matching filter, in commit order, a page at a time."""
        after = ""
        while True:
            resp = self.list(filter=filter, after_event_id=after, limit=page)
            yield from resp.entries
            if not resp.next_cursor:
                return
            after = resp.next_cursor

    def count(self, *, filter: Optional[audit_pb2.Filter] = None, timeout: Optional[float] = _UNSET) -> int:
        req = audit_pb2.CountRequest(filter=filter)
        return self._core.unary(self._core.audit.Count, req, timeout, True, write=False).count

    def get(self, event_id: str, *, timeout: Optional[float] = _UNSET) -> audit_pb2.AuditEntry:
        req = audit_pb2.GetRequest(event_id=event_id)
        return self._core.unary(self._core.audit.Get, req, timeout, True, write=False).entry

    def verify(self, *, timeout: Optional[float] = _UNSET) -> audit_pb2.VerifyResponse:
        """Checks the hash chain of every committed entry."""
        return self._core.unary(self._core.audit.Verify, audit_pb2.VerifyRequest(), timeout, True, write=False)

    def flush(self, *, timeout: Optional[float] = _UNSET) -> None:
        """Waits until every entry accepted so far is committed."""
        self._core.unary(self._core.audit.Flush, audit_pb2.FlushRequest(), timeout, True, write=False)


class Client:
    """A blocking agentstate client; safe to share between threads.

    Args:
        target: the node's gRPC address, "host:port".
        token: the node's bearer token, sent as "authorization: Bearer <token>".
        tls: None for plaintext; True for TLS verified by the system's roots;
            PEM bytes of the CA that signed the node's certificate; or a
            :class:`agentstate.TLS` (CA, client certificate, server name).
        timeout: default seconds each call may take, retries included (None:
            no deadline); each method also takes timeout=.
        retry: the retry policy (agentstate.NO_RETRY for none).
        batched_appends: appends share one AppendBatches stream (True) or
            are unary Append calls.
        append_linger: most seconds a batch waits for more appends while
            more are in flight than waiting (0: never waits).
        append_transport: how the batched stream runs: "loop" (default), a
            grpc.aio stream on one background event loop per process, which
            costs appending threads far fewer thread switches; "threads",
            grpcio's blocking stream, for a process that also runs grpc.aio
            on loops of its own (see agentstate.loop_batch on mixing).
        options: extra gRPC channel options.
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
        append_transport: str = "loop",
        options: Iterable[Any] = (),
    ) -> None:
        settings = tls_settings(tls)
        options = tuple(options)
        self.channel = open_channel(target, settings, options)
        core = Core(self.channel, token, timeout, retry)
        self.sessions = Sessions(
            core, batched_appends, append_linger, append_transport, lambda: open_aio_channel(target, settings, options)
        )
        self.plans = Plans(core)
        self.audit = Audit(core)

    def close(self) -> None:
        """Closes the append stream and the channel; calls still waiting fail.

        An append still waiting fails with Unavailable if it was not sent,
        else OutcomeUnknown (it may have been stored).
        """
        self.sessions._close()
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
