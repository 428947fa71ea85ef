"""Sessions of the blocking client: ordered messages, appends (batched or unary), state, tails, export and import."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Union

import grpc

from agentstate import appends, build, errors
from agentstate import retry as retries
from agentstate.appends import DEFAULT_LINGER
from agentstate.batch import BatchAppender
from agentstate.core import UNSET, Core, Enum
from agentstate.loop_batch import LoopBatchAppender
from agentstate.session.v1 import session_pb2
from agentstate.tail import Tail


class Sessions:
    """Sessions: ordered messages with dense 0-based sequences."""

    def __init__(
        self,
        core: Core,
        batched: bool,
        linger: float = DEFAULT_LINGER,
        transport: str = "loop",
        open_aio: Optional[Callable[[], Any]] = None,
    ) -> None:
        self._core = core
        # Append over an encoded request: the unary path, and appends too large for a batch.
        self._append_encoded = core.channel.unary_unary(
            appends.APPEND_METHOD,
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
        timeout: Optional[float] = UNSET,
    ) -> session_pb2.CreateSessionResponse:
        """Creates a session (a new ULID unless session_id is given).

        The id is chosen before the first attempt, so a retry cannot create a
        second session; a retry that finds the first attempt's session
        answers created=False.
        """
        req = build.create_session_request(actor_name, session_id, namespace, automation, metadata)
        return self._core.unary(self._core.sessions.Create, req, timeout, True)

    def get(self, session_id: str, *, timeout: Optional[float] = UNSET) -> session_pb2.Session:
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
        timeout: Optional[float] = UNSET,
    ) -> session_pb2.ListSessionsResponse:
        req = session_pb2.ListSessionsRequest(
            actor_name=actor_name,
            namespace=namespace,
            state=build.enum_value(session_pb2.SessionState, "SESSION_STATE_", state),
            limit=limit,
            cursor=cursor,
        )
        return self._core.unary(self._core.sessions.List, req, timeout, True, write=False)

    def close(self, session_id: str, *, timeout: Optional[float] = UNSET) -> session_pb2.Session:
        req = session_pb2.CloseSessionRequest(session_id=session_id)
        return self._core.unary(self._core.sessions.Close, req, timeout, False).session

    def delete(self, session_id: str, *, timeout: Optional[float] = UNSET) -> session_pb2.DeleteSessionResponse:
        req = session_pb2.DeleteSessionRequest(session_id=session_id)
        return self._core.unary(self._core.sessions.Delete, req, timeout, False)

    def append(
        self,
        session_id: str,
        messages: Iterable[build.MessageLike],
        *,
        expect: Optional[int] = None,
        state: build.StateDeltaLike = None,
        scopes: build.ScopesLike = None,
        timeout: Optional[float] = UNSET,
    ) -> session_pb2.AppendResponse:
        """Appends one turn atomically: all messages get consecutive sequences, or none is stored.

        Messages without a message id get a new ULID before the first
        attempt, so retries (of UNAVAILABLE and OUTCOME_UNKNOWN) cannot
        store the turn twice: a retry of a stored turn answers its original
        sequences with duplicate=True. Concurrent appends of this client
        share one AppendBatches stream unless the client was made with
        batched_appends=False.

        expect=N stores the turn only if the session's next sequence is N,
        else raises :class:`agentstate.SequenceMismatch` (a
        FailedPrecondition carrying the session's next_sequence) and stores
        nothing. The node checks it first, so a retry of a conditional turn
        that was stored would be refused the same way: such a turn is not
        retried after OutcomeUnknown; read the messages from N (its message
        ids tell whether it went in). state and scopes change the session's
        state and shared scopes in the same transaction (see update_state).
        """
        # Encoded once: every attempt sends the same bytes, ids included.
        data = build.encoded_append_request(session_id, messages, expect, state, scopes)
        return self._send(data, timeout, expect is None)

    def append_request(
        self, req: session_pb2.AppendRequest, *, timeout: Optional[float] = UNSET
    ) -> session_pb2.AppendResponse:
        """Appends a ready AppendRequest as is; without message ids, or conditional, it is not retried on OUTCOME_UNKNOWN."""
        idempotent = all(m.message_id for m in req.messages) and not req.HasField("expected_next_sequence")
        return self._send(req.SerializeToString(), timeout, idempotent)

    def _send(self, data: bytes, timeout: Optional[float], idempotent: bool) -> session_pb2.AppendResponse:
        once = self._batch.append if self._batch is not None else self._append_encoded_once
        return retries.call(self._core.policy, lambda left: once(data, left), self._core.deadline(timeout), idempotent)

    def _append_encoded_once(self, data: bytes, timeout: Optional[float]) -> session_pb2.AppendResponse:
        try:
            return self._append_encoded(data, timeout=timeout, metadata=self._core.metadata)
        except grpc.RpcError as e:
            raise appends.unary_error(e) from None

    def get_state(
        self, session_id: str = "", *, scopes: Iterable[str] = (), timeout: Optional[float] = UNSET
    ) -> session_pb2.GetStateResponse:
        """The session's state (state_json, as of next_sequence) and the shared scopes named, in that order.

        session_id may be empty to read scopes only (state_json is then "").
        """
        req = build.get_state_request(session_id, scopes)
        return self._core.unary(self._core.sessions.GetState, req, timeout, True, write=False)

    def update_state(
        self,
        session_id: str,
        *,
        set: Optional[Mapping[str, Any]] = None,
        delete: Iterable[str] = (),
        scopes: build.ScopesLike = None,
        expect: Optional[int] = None,
        timeout: Optional[float] = UNSET,
    ) -> session_pb2.UpdateStateResponse:
        """Changes the session's state without a message: each key of set becomes its value (JSON-encoded),
        then each key of delete is removed; scopes maps a shared scope's name ("app:x") to its change
        (agentstate.state_delta(set=..., delete=...), or a mapping of keys to set).

        expect=N applies it only if the session's next sequence is N (else
        SequenceMismatch). Not retried after OutcomeUnknown: it carries no
        client id, and a retry could overwrite a later writer's keys.
        """
        req = build.update_state_request(session_id, set, delete, scopes, expect)
        return self._core.unary(self._core.sessions.UpdateState, req, timeout, False)

    def tail(self, session_id: str, *, from_sequence: int = 0, from_now: bool = False) -> Tail:
        """The session's messages from from_sequence (or only new ones: from_now), then each as it commits.

        Iterating the returned :class:`agentstate.tail.Tail` yields
        feed_pb2.SessionEvent values: a message, truncated (sequences
        removed before they were read), and a last ended (the session was
        closed or deleted, or the node is stopping). A stream that breaks is
        reopened from the next sequence under the client's retry policy, so
        nothing is delivered twice or skipped; to resume later, pass the
        tail's next_sequence as from_sequence. It has no deadline;
        cancel() (from any thread) or leaving the loop ends it.
        """
        return Tail(self._core, session_id, from_sequence, from_now)

    def list_messages(
        self,
        session_id: str,
        *,
        from_sequence: int = 0,
        limit: int = 0,
        timeout: Optional[float] = UNSET,
    ) -> session_pb2.ListMessagesResponse:
        """One page of messages from from_sequence (default 100, at most 1000)."""
        req = session_pb2.ListMessagesRequest(session_id=session_id, from_sequence=from_sequence, limit=limit)
        return self._core.unary(self._core.sessions.ListMessages, req, timeout, True, write=False)

    def get_item(self, session_id: str, item_key: str, *, timeout: Optional[float] = UNSET) -> session_pb2.Message:
        """The message the session holds under item_key (NotFound when none)."""
        req = session_pb2.GetItemRequest(session_id=session_id, item_key=item_key)
        return self._core.unary(self._core.sessions.GetItem, req, timeout, True, write=False).message

    def list_items(
        self,
        session_id: str,
        *,
        kind: str = "",
        key_prefix: str = "",
        newest_first: bool = False,
        limit: int = 0,
        cursor_sequence: Optional[int] = None,
        timeout: Optional[float] = UNSET,
    ) -> session_pb2.ListItemsResponse:
        """One page of the session's messages of kind whose item key starts with key_prefix (either
        may be empty: any), oldest or newest first; pass the answer's next_cursor_sequence (when
        HasField) as cursor_sequence for the next page."""
        req = build.list_items_request(session_id, kind, key_prefix, newest_first, limit, cursor_sequence)
        return self._core.unary(self._core.sessions.ListItems, req, timeout, True, write=False)

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
        timeout: Optional[float] = UNSET,
    ) -> session_pb2.TokenUsage:
        """Adds the deltas to the session's totals (not retried on OUTCOME_UNKNOWN, nor after a broken connection: it would add twice)."""
        req = session_pb2.UpdateTokenUsageRequest(
            session_id=session_id, input_tokens=input_tokens, output_tokens=output_tokens, cost=cost
        )
        return self._core.unary(self._core.sessions.UpdateTokenUsage, req, timeout, False).total

    def link_plan(
        self, session_id: str, plan_id: str, *, phase: str = "", state: str = "", timeout: Optional[float] = UNSET
    ) -> session_pb2.Session:
        req = session_pb2.LinkPlanRequest(
            session_id=session_id, plan=session_pb2.LinkedPlan(plan_id=plan_id, phase=phase, state=state)
        )
        return self._core.unary(self._core.sessions.LinkPlan, req, timeout, True).session

    def export(self, session_id: str, *, timeout: Optional[float] = UNSET) -> session_pb2.ExportSessionResponse:
        """The session, its messages and plan links as canonical JSON with a checksum."""
        req = session_pb2.ExportSessionRequest(session_id=session_id)
        return self._core.unary(self._core.sessions.Export, req, timeout, True, write=False)

    def import_session(self, data: str, *, timeout: Optional[float] = UNSET) -> session_pb2.ImportSessionResponse:
        """Imports an export's data as a new session (not retried on OUTCOME_UNKNOWN: it could import twice)."""
        req = session_pb2.ImportSessionRequest(data=data)
        return self._core.unary(self._core.sessions.Import, req, timeout, False)

    def export_stream(self, session_id: str, *, timeout: Optional[float] = UNSET) -> Iterator[session_pb2.ExportChunk]:
        """An export of any size: a header, pages of messages, a trailer with the checksum.

        Not retried: a stream broken midway raises, and the export starts
        over. timeout bounds the whole stream (None: no deadline, for big
        sessions).
        """
        req = session_pb2.ExportSessionRequest(session_id=session_id)
        t = self._core.timeout if timeout is UNSET else timeout
        try:
            yield from self._core.sessions.ExportStream(req, timeout=t, metadata=self._core.metadata)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None

    def import_stream(
        self,
        chunks: Iterable[Union[session_pb2.ImportChunk, session_pb2.ExportChunk]],
        *,
        timeout: Optional[float] = UNSET,
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

        t = self._core.timeout if timeout is UNSET else timeout
        try:
            return self._core.sessions.ImportStream(requests(), timeout=t, metadata=self._core.metadata)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None

    def _close(self) -> None:
        if self._batch is not None:
            self._batch.close()
