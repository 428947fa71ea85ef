"""The blocking client: :class:`Client` and its sessions, plans and audit parts.

Results are the generated protobuf messages of ``agentstate.<x>.v1`` (typed
by their .pyi stubs); failures are :mod:`agentstate.errors` exceptions.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Iterator, Optional, TypeVar, Union

import grpc

from agentstate import build, errors
from agentstate import retry as retries
from agentstate.retry import RetryPolicy
from agentstate.audit.v1 import audit_pb2, audit_pb2_grpc
from agentstate.batch import DEFAULT_LINGER, BatchAppender
from agentstate.connection import TLSArg, auth_metadata, open_aio_channel, open_channel, tls_settings
from agentstate.loop_batch import LoopBatchAppender
from agentstate.plan.v1 import plan_pb2, plan_pb2_grpc
from agentstate.session.v1 import session_pb2, session_pb2_grpc

T = TypeVar("T")
Enum = Union[str, int, None]

DEFAULT_TIMEOUT = 30.0
_UNSET: Any = object()


class _Core:
    """What the parts share: the channel's stubs, the token, the deadline and retry rules."""

    def __init__(self, channel: grpc.Channel, token: Optional[str], timeout: Optional[float], policy: RetryPolicy) -> None:
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

    def unary(self, method: Callable[..., T], req: Any, timeout: Optional[float], idempotent: bool, write: bool = True) -> T:
        """Calls method(req) under the client's retry policy; one deadline spans all attempts."""

        def attempt(left: Optional[float]) -> T:
            try:
                return method(req, timeout=left, metadata=self.metadata)
            except grpc.RpcError as e:
                err = errors.from_rpc_error(e)
                raise (errors.for_write(err) if write else err) from None

        return retries.call(self.policy, attempt, self.deadline(timeout), idempotent)


class Sessions:
    """Sessions: ordered messages with dense 0-based sequences."""

    def __init__(
        self,
        core: _Core,
        batched: bool,
        linger: float = DEFAULT_LINGER,
        transport: str = "loop",
        open_aio: Optional[Callable[[], Any]] = None,
    ) -> None:
        self._core = core
        # Append over an encoded request, for appends too large for a batch.
        self._append_encoded = core.channel.unary_unary(
            "/agentstate.session.v1.SessionService/Append",
            request_serializer=None,
            response_deserializer=session_pb2.AppendResponse.FromString,
        )
        if transport not in ("loop", "threads"):
            raise ValueError(f'append_transport must be "loop" or "threads", not {transport!r}')
        self._batch: Union[BatchAppender, LoopBatchAppender, None] = None
        if batched and transport == "loop":
            if open_aio is None:
                raise ValueError('append_transport "loop" needs a way to open a grpc.aio channel')
            self._batch = LoopBatchAppender(open_aio, core.metadata, self._append_encoded_once, linger)
        elif batched:
            self._batch = BatchAppender(core.channel, core.metadata, self._append_encoded_once, linger)

    @property
    def appender(self) -> Union[BatchAppender, LoopBatchAppender, None]:
        """The shared AppendBatches stream's appender (None without batched appends); its
        batches_sent, appends_sent and streams_opened count what it did."""
        return self._batch

    def create(
        self,
        actor_name: str,
        *,
        session_id: Optional[str] = None,
        namespace: str = "",
        automation: str = "",
        metadata: build.JSONObject = None,
        timeout: Optional[float] = _UNSET,
    ) -> session_pb2.CreateSessionResponse:
        """Creates a session (a new ULID unless session_id is given).

        The id is chosen before the first attempt, so a retry cannot create a
        second session; a retry that finds the first attempt's session
        answers created=False.
        """
        req = build.create_session_request(actor_name, session_id, namespace, automation, metadata)
        return self._core.unary(self._core.sessions.Create, req, timeout, True)

    def get(self, session_id: str, *, timeout: Optional[float] = _UNSET) -> session_pb2.Session:
        req = session_pb2.GetSessionRequest(session_id=session_id)
        return self._core.unary(self._core.sessions.Get, req, timeout, True, write=False).session

    def list(
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
        return self._core.unary(self._core.sessions.List, req, timeout, True, write=False)

    def close(self, session_id: str, *, timeout: Optional[float] = _UNSET) -> session_pb2.Session:
        req = session_pb2.CloseSessionRequest(session_id=session_id)
        return self._core.unary(self._core.sessions.Close, req, timeout, False).session

    def delete(self, session_id: str, *, timeout: Optional[float] = _UNSET) -> session_pb2.DeleteSessionResponse:
        req = session_pb2.DeleteSessionRequest(session_id=session_id)
        return self._core.unary(self._core.sessions.Delete, req, timeout, False)

    def append(
        self,
        session_id: str,
        messages: Iterable[build.MessageLike],
        *,
        timeout: Optional[float] = _UNSET,
    ) -> session_pb2.AppendResponse:
        """Appends one turn atomically: all messages get consecutive sequences, or none is stored.

        Messages without a message id get a new ULID before the first
        attempt, so retries (of UNAVAILABLE and OUTCOME_UNKNOWN) cannot
        store the turn twice: a retry of a stored turn answers its original
        sequences with duplicate=True. Concurrent appends of this client
        share one AppendBatches stream unless the client was made with
        batched_appends=False.
        """
        if self._batch is not None:
            # Encoded once: every attempt sends the same bytes, ids included.
            data = build.encoded_append_request(session_id, messages)
            return self._append_batched(data, timeout, True)
        req = build.append_request(session_id, messages)
        return self._append(req, timeout, True)

    def append_request(
        self, req: session_pb2.AppendRequest, *, timeout: Optional[float] = _UNSET
    ) -> session_pb2.AppendResponse:
        """Appends a ready AppendRequest as is; without message ids it is not retried on OUTCOME_UNKNOWN."""
        idempotent = all(m.message_id for m in req.messages)
        if self._batch is not None:
            return self._append_batched(req.SerializeToString(), timeout, idempotent)
        return self._append(req, timeout, idempotent)

    def _append(
        self, req: session_pb2.AppendRequest, timeout: Optional[float], idempotent: bool
    ) -> session_pb2.AppendResponse:
        once = self._append_unary_once
        return retries.call(self._core.policy, lambda left: once(req, left), self._core.deadline(timeout), idempotent)

    def _append_batched(self, data: bytes, timeout: Optional[float], idempotent: bool) -> session_pb2.AppendResponse:
        assert self._batch is not None
        once = self._batch.append
        return retries.call(self._core.policy, lambda left: once(data, left), self._core.deadline(timeout), idempotent)

    def _append_unary_once(self, req: session_pb2.AppendRequest, timeout: Optional[float]) -> session_pb2.AppendResponse:
        try:
            return self._core.sessions.Append(req, timeout=timeout, metadata=self._core.metadata)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None

    def _append_encoded_once(self, data: bytes, timeout: Optional[float]) -> session_pb2.AppendResponse:
        try:
            return self._append_encoded(data, timeout=timeout, metadata=self._core.metadata)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None

    def list_messages(
        self,
        session_id: str,
        *,
        from_sequence: int = 0,
        limit: int = 0,
        timeout: Optional[float] = _UNSET,
    ) -> session_pb2.ListMessagesResponse:
        """One page of messages from from_sequence (default 100, at most 1000)."""
        req = session_pb2.ListMessagesRequest(session_id=session_id, from_sequence=from_sequence, limit=limit)
        return self._core.unary(self._core.sessions.ListMessages, req, timeout, True, write=False)

    def iter_messages(
        self, session_id: str, *, from_sequence: int = 0, page: int = 1000
    ) -> Iterator[session_pb2.Message]:
        """Every message from from_sequence on, in sequence order, a page at a time."""
        while True:
            resp = self.list_messages(session_id, from_sequence=from_sequence, limit=page)
            yield from resp.messages
            if not resp.messages or resp.next_sequence <= from_sequence:
                return
            from_sequence = resp.next_sequence

    def update_token_usage(
        self,
        session_id: str,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float = 0.0,
        timeout: Optional[float] = _UNSET,
    ) -> session_pb2.TokenUsage:
        """Adds the deltas to the session's totals (not retried on OUTCOME_UNKNOWN, nor after a broken connection: it would add twice)."""
        req = session_pb2.UpdateTokenUsageRequest(
            session_id=session_id, input_tokens=input_tokens, output_tokens=output_tokens, cost=cost
        )
        return self._core.unary(self._core.sessions.UpdateTokenUsage, req, timeout, False).total

    def link_plan(
        self, session_id: str, plan_id: str, *, phase: str = "", state: str = "", timeout: Optional[float] = _UNSET
    ) -> session_pb2.Session:
        req = session_pb2.LinkPlanRequest(
            session_id=session_id, plan=session_pb2.LinkedPlan(plan_id=plan_id, phase=phase, state=state)
        )
        return self._core.unary(self._core.sessions.LinkPlan, req, timeout, True).session

    def export(self, session_id: str, *, timeout: Optional[float] = _UNSET) -> session_pb2.ExportSessionResponse:
        """The session, its messages and plan links as canonical JSON with a checksum."""
        req = session_pb2.ExportSessionRequest(session_id=session_id)
        return self._core.unary(self._core.sessions.Export, req, timeout, True, write=False)

    def import_session(self, data: str, *, timeout: Optional[float] = _UNSET) -> session_pb2.ImportSessionResponse:
        """Imports an export's data as a new session (not retried on OUTCOME_UNKNOWN: it could import twice)."""
        req = session_pb2.ImportSessionRequest(data=data)
        return self._core.unary(self._core.sessions.Import, req, timeout, False)

    def export_stream(self, session_id: str, *, timeout: Optional[float] = _UNSET) -> Iterator[session_pb2.ExportChunk]:
        """An export of any size: a header, pages of messages, a trailer with the checksum.

        Not retried: a stream broken midway raises, and the export starts
        over. timeout bounds the whole stream (None: no deadline, for big
        sessions).
        """
        req = session_pb2.ExportSessionRequest(session_id=session_id)
        t = self._core.timeout if timeout is _UNSET else timeout
        try:
            yield from self._core.sessions.ExportStream(req, timeout=t, metadata=self._core.metadata)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None

    def import_stream(
        self,
        chunks: Iterable[Union[session_pb2.ImportChunk, session_pb2.ExportChunk]],
        *,
        timeout: Optional[float] = _UNSET,
    ) -> session_pb2.ImportSessionResponse:
        """Imports an export of any size as a new session; chunks may be export_stream's own.

        The node shows the session only once the trailer's checksum matched;
        any failure leaves nothing stored, so a failed import may simply be
        run again (it is not retried here: the chunks may be a one-shot
        iterator).
        """

        def requests() -> Iterator[session_pb2.ImportChunk]:
            for c in chunks:
                # ExportChunk and ImportChunk have the same fields and numbers.
                yield c if isinstance(c, session_pb2.ImportChunk) else session_pb2.ImportChunk.FromString(c.SerializeToString())

        t = self._core.timeout if timeout is _UNSET else timeout
        try:
            return self._core.sessions.ImportStream(requests(), timeout=t, metadata=self._core.metadata)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None

    def _close(self) -> None:
        if self._batch is not None:
            self._batch.close()


class Plans:
    """Plans: per-plan error histories, retry accounting and recovery advice."""

    def __init__(self, core: _Core) -> None:
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
        timeout: Optional[float] = _UNSET,
    ) -> plan_pb2.RecordErrorResponse:
        """Records an error; phase is a name ("execute") or plan_pb2.Phase.

        record_id (a new ULID unless given) makes retries safe: a record id
        stored already answers the stored record with duplicate=True.
        """
        req = build.record_error_request(
            plan_id, phase, step_id, error_type, message, tool, actor_name, stack_summary, attributes, record_id
        )
        return self._core.unary(self._core.plans.RecordError, req, timeout, True)

    def set_policy(self, plan_id: str, max_retries: int, *, timeout: Optional[float] = _UNSET) -> plan_pb2.SetPolicyResponse:
        req = plan_pb2.SetPolicyRequest(plan_id=plan_id, max_retries=max_retries)
        return self._core.unary(self._core.plans.SetPolicy, req, timeout, True)

    def record_success(
        self, plan_id: str, *, phase: Enum = None, step_id: str = "", timeout: Optional[float] = _UNSET
    ) -> plan_pb2.RecordSuccessResponse:
        req = plan_pb2.RecordSuccessRequest(
            plan_id=plan_id, phase=build.enum_value(plan_pb2.Phase, "PHASE_", phase), step_id=step_id
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
        timeout: Optional[float] = _UNSET,
    ) -> plan_pb2.HistoryResponse:
        """One page of the plan's error records (next_sequence is -1 after the last)."""
        req = build.history_request(plan_id, phase, category, from_sequence, limit)
        return self._core.unary(self._core.plans.History, req, timeout, True, write=False)

    def error_details(self, plan_id: str, *, timeout: Optional[float] = _UNSET) -> plan_pb2.ErrorDetailsResponse:
        req = plan_pb2.ErrorDetailsRequest(plan_id=plan_id)
        return self._core.unary(self._core.plans.ErrorDetails, req, timeout, True, write=False)

    def merge_error_details(
        self, plan_id: str, details: build.JSONObject, *, timeout: Optional[float] = _UNSET
    ) -> plan_pb2.MergeErrorDetailsResponse:
        req = plan_pb2.MergeErrorDetailsRequest(plan_id=plan_id, details_json=build.json_object(details, "details"))
        return self._core.unary(self._core.plans.MergeErrorDetails, req, timeout, True)


class Audit:
    """The hash-chained audit trail."""

    def __init__(self, core: _Core) -> None:
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
        core = _Core(self.channel, token, timeout, retry)
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
