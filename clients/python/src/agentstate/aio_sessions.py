"""Sessions of the asyncio client: the calls of :class:`agentstate.sessions.Sessions`, as coroutines."""

from __future__ import annotations

from typing import Any, AsyncIterable, AsyncIterator, Iterable, Mapping, Optional, Union

import grpc
import grpc.aio

from agentstate import appends, build, errors
from agentstate import retry as retries
from agentstate.aio_batch import AsyncBatchAppender
from agentstate.appends import DEFAULT_LINGER
from agentstate.core import UNSET, AsyncCore, Enum
from agentstate.session.v1 import session_pb2
from agentstate.tail import AsyncTail


class AsyncSessions:
    """Sessions, as coroutines; see :class:`agentstate.sessions.Sessions`."""

    def __init__(self, core: AsyncCore, batched: bool, linger: float = DEFAULT_LINGER) -> None:
        self._core = core
        # Append over an encoded request: the unary path, and appends too large for a batch.
        self._append_encoded = core.channel.unary_unary(
            appends.APPEND_METHOD,
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
        timeout: Optional[float] = UNSET,
    ) -> session_pb2.CreateSessionResponse:
        req = build.create_session_request(actor_name, session_id, namespace, automation, metadata)
        return await self._core.unary(self._core.sessions.Create, req, timeout, True)

    async def get(self, session_id: str, *, timeout: Optional[float] = UNSET) -> session_pb2.Session:
        req = session_pb2.GetSessionRequest(session_id=session_id)
        return (await self._core.unary(self._core.sessions.Get, req, timeout, True, write=False)).session

    async def close(self, session_id: str, *, timeout: Optional[float] = UNSET) -> session_pb2.Session:
        req = session_pb2.CloseSessionRequest(session_id=session_id)
        return (await self._core.unary(self._core.sessions.Close, req, timeout, False)).session

    async def append(
        self,
        session_id: str,
        messages: Iterable[build.MessageLike],
        *,
        expect: Optional[int] = None,
        state: build.StateDeltaLike = None,
        scopes: build.ScopesLike = None,
        timeout: Optional[float] = UNSET,
    ) -> session_pb2.AppendResponse:
        """Appends one turn atomically; message ids are filled in before the first attempt (see Sessions.append)."""
        # Encoded once (see Sessions.append): every attempt sends the same bytes.
        data = build.encoded_append_request(session_id, messages, expect, state, scopes)
        return await self._send(data, timeout, expect is None)

    async def append_request(
        self, req: session_pb2.AppendRequest, *, timeout: Optional[float] = UNSET
    ) -> session_pb2.AppendResponse:
        """Appends a ready AppendRequest as is; without message ids, or conditional, it is not retried on OUTCOME_UNKNOWN."""
        idempotent = all(m.message_id for m in req.messages) and not req.HasField("expected_next_sequence")
        return await self._send(req.SerializeToString(), timeout, idempotent)

    async def _send(self, data: bytes, timeout: Optional[float], idempotent: bool) -> session_pb2.AppendResponse:
        once = self._batch.append if self._batch is not None else self._append_encoded_once
        return await retries.call_async(self._core.policy, lambda left: once(data, left), self._core.deadline(timeout), idempotent)

    async def _append_encoded_once(self, data: bytes, timeout: Optional[float]) -> session_pb2.AppendResponse:
        try:
            return await self._append_encoded(data, timeout=timeout, metadata=self._core.metadata)
        except grpc.aio.AioRpcError as e:
            raise appends.unary_error(e) from None

    async def get_state(
        self, session_id: str = "", *, scopes: Iterable[str] = (), timeout: Optional[float] = UNSET
    ) -> session_pb2.GetStateResponse:
        """See Sessions.get_state."""
        req = build.get_state_request(session_id, scopes)
        return await self._core.unary(self._core.sessions.GetState, req, timeout, True, write=False)

    async def update_state(
        self,
        session_id: str,
        *,
        set: Optional[Mapping[str, Any]] = None,
        delete: Iterable[str] = (),
        scopes: build.ScopesLike = None,
        expect: Optional[int] = None,
        timeout: Optional[float] = UNSET,
    ) -> session_pb2.UpdateStateResponse:
        """See Sessions.update_state."""
        req = build.update_state_request(session_id, set, delete, scopes, expect)
        return await self._core.unary(self._core.sessions.UpdateState, req, timeout, False)

    def tail(self, session_id: str, *, from_sequence: int = 0, from_now: bool = False) -> AsyncTail:
        """An async iterator of the session's events; see Sessions.tail."""
        return AsyncTail(self._core, session_id, from_sequence, from_now)

    async def list_messages(
        self, session_id: str, *, from_sequence: int = 0, limit: int = 0, timeout: Optional[float] = UNSET
    ) -> session_pb2.ListMessagesResponse:
        req = session_pb2.ListMessagesRequest(session_id=session_id, from_sequence=from_sequence, limit=limit)
        return await self._core.unary(self._core.sessions.ListMessages, req, timeout, True, write=False)

    async def get_item(self, session_id: str, item_key: str, *, timeout: Optional[float] = UNSET) -> session_pb2.Message:
        """See Sessions.get_item."""
        req = session_pb2.GetItemRequest(session_id=session_id, item_key=item_key)
        return (await self._core.unary(self._core.sessions.GetItem, req, timeout, True, write=False)).message

    async def list_items(
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
        """See Sessions.list_items."""
        req = build.list_items_request(session_id, kind, key_prefix, newest_first, limit, cursor_sequence)
        return await self._core.unary(self._core.sessions.ListItems, req, timeout, True, write=False)

    async def export(self, session_id: str, *, timeout: Optional[float] = UNSET) -> session_pb2.ExportSessionResponse:
        req = session_pb2.ExportSessionRequest(session_id=session_id)
        return await self._core.unary(self._core.sessions.Export, req, timeout, True, write=False)

    async def import_session(self, data: str, *, timeout: Optional[float] = UNSET) -> session_pb2.ImportSessionResponse:
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
        timeout: Optional[float] = UNSET,
    ) -> session_pb2.ListSessionsResponse:
        req = session_pb2.ListSessionsRequest(
            actor_name=actor_name,
            namespace=namespace,
            state=build.enum_value(session_pb2.SessionState, "SESSION_STATE_", state),
            limit=limit,
            cursor=cursor,
        )
        return await self._core.unary(self._core.sessions.List, req, timeout, True, write=False)

    async def delete(self, session_id: str, *, timeout: Optional[float] = UNSET) -> session_pb2.DeleteSessionResponse:
        req = session_pb2.DeleteSessionRequest(session_id=session_id)
        return await self._core.unary(self._core.sessions.Delete, req, timeout, False)

    async def update_token_usage(
        self,
        session_id: str,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float = 0.0,
        timeout: Optional[float] = UNSET,
    ) -> session_pb2.TokenUsage:
        req = session_pb2.UpdateTokenUsageRequest(
            session_id=session_id, input_tokens=input_tokens, output_tokens=output_tokens, cost=cost
        )
        return (await self._core.unary(self._core.sessions.UpdateTokenUsage, req, timeout, False)).total

    async def link_plan(
        self, session_id: str, plan_id: str, *, phase: str = "", state: str = "", timeout: Optional[float] = UNSET
    ) -> session_pb2.Session:
        req = session_pb2.LinkPlanRequest(
            session_id=session_id, plan=session_pb2.LinkedPlan(plan_id=plan_id, phase=phase, state=state)
        )
        return (await self._core.unary(self._core.sessions.LinkPlan, req, timeout, True)).session

    async def export_stream(
        self, session_id: str, *, timeout: Optional[float] = UNSET
    ) -> AsyncIterator[session_pb2.ExportChunk]:
        """An export of any size, chunk by chunk; not retried (see Sessions.export_stream)."""
        req = session_pb2.ExportSessionRequest(session_id=session_id)
        t = self._core.timeout if timeout is UNSET else timeout
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
        timeout: Optional[float] = UNSET,
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

        t = self._core.timeout if timeout is UNSET else timeout
        try:
            return await self._core.sessions.ImportStream(requests(), timeout=t, metadata=self._core.metadata)
        except grpc.aio.AioRpcError as e:
            raise errors.from_rpc_error(e) from None

    async def _close(self) -> None:
        if self._batch is not None:
            await self._batch.close()
