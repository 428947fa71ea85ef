"""The batched append stream (AppendBatches) for asyncio tasks.

The asyncio counterpart of :mod:`agentstate.batch`, with the same meaning:
appends of concurrent tasks share one stream, the appends waiting while a
batch is being written travel together in the next one, each is answered
under its tag, and a failed stream fails its appends with Unavailable (not
sent) or OutcomeUnknown (sent). It runs on one event loop, so it needs no
locks.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Awaitable, Callable, Deque, Optional, Tuple

import grpc
import grpc.aio

from agentstate import errors
from agentstate.appends import (
    DEFAULT_LINGER,
    MAX_BATCH_BYTES,
    Appender,
    Ledger,
    batches_method,
    deadline_error,
    read_outcomes,
    response,
)
from agentstate.connection import Metadata
from agentstate.session.v1 import session_pb2

# A unary Append of an encoded AppendRequest.
AsyncUnaryAppend = Callable[[bytes, Optional[float]], Awaitable[session_pb2.AppendResponse]]


class _Call:
    __slots__ = ("tag", "data", "future")

    def __init__(self, tag: int, data: bytes, future: "asyncio.Future[session_pb2.AppendStreamResponse]") -> None:
        self.tag = tag
        self.data = data
        self.future = future


def _settle(call: _Call, outcome: Any = None, error: Optional[BaseException] = None) -> None:
    # A caller that gave up (deadline, cancellation) has settled its future already.
    if call.future.done():
        return
    if error is not None:
        call.future.set_exception(error)
    else:
        call.future.set_result(outcome)


class _Stream:
    """One AppendBatches stream: a writer task, a reader task, and the appends between them."""

    def __init__(self, owner: "AsyncBatchAppender") -> None:
        self._owner = owner
        self._loop = asyncio.get_running_loop()
        self._ledger: Ledger[_Call] = Ledger(owner)
        self._wake = asyncio.Event()
        # Set when as many appends wait as are in flight (see batch.DEFAULT_LINGER).
        self._enough = asyncio.Event()
        self._linger = owner._linger
        # Deadlines of the calls in enqueue order, watched by one timer: a
        # timer per append costs the event loop a heap push and pop on every
        # append. Calls made with the same timeout (the usual case) have
        # non-decreasing deadlines; one whose deadline is earlier than the
        # last gets a timer of its own.
        self._deadlines: Deque[Tuple[float, _Call]] = deque()
        self._watchdog: Optional[asyncio.TimerHandle] = None
        # Set once the node's headers arrived (see batch._Stream): appends
        # are written only after, so one failed with the connection was
        # never sent.
        self._established = asyncio.Event()
        self._rpc = owner._open()
        self._writer = self._loop.create_task(self._write())
        self._reader = self._loop.create_task(self._read())

    @property
    def err(self) -> Optional[errors.AgentStateError]:
        return self._ledger.err

    def enqueue(self, data: bytes) -> _Call:
        call = self._ledger.add(lambda tag: _Call(tag, data, self._loop.create_future()))
        self._wake.set()
        if self._ledger.enough():
            self._enough.set()
        return call

    def watch(self, call: _Call, deadline: float) -> Optional[asyncio.TimerHandle]:
        """Makes call expire at deadline (loop time); returns a timer the caller must cancel, if one was needed."""
        if self._deadlines and deadline < self._deadlines[-1][0]:
            return self._loop.call_at(deadline, self.expire, call)
        self._deadlines.append((deadline, call))
        if self._watchdog is None:
            self._watchdog = self._loop.call_at(deadline, self._expire_due)
        return None

    def _expire_due(self) -> None:
        self._watchdog = None
        now = self._loop.time()
        dl = self._deadlines
        while dl and (dl[0][1].future.done() or dl[0][0] <= now):
            _, call = dl.popleft()
            self.expire(call)
        if dl:
            self._watchdog = self._loop.call_at(dl[0][0], self._expire_due)

    def _forget_done(self) -> None:
        # Outcomes come roughly in enqueue order, so this keeps the deque short.
        dl = self._deadlines
        while dl and dl[0][1].future.done():
            dl.popleft()

    def expire(self, call: _Call) -> None:
        """The caller's deadline passed: Unavailable if not sent (withdrawn), else OutcomeUnknown."""
        if call.future.done():
            return
        call.future.set_exception(deadline_error(sent=not self.withdraw(call)))

    def withdraw(self, call: _Call) -> bool:
        return self._ledger.withdraw(call)

    def close(self) -> None:
        pending, err = self._ledger.close()
        for call in pending:
            _settle(call, error=err)
        self._established.set()  # nothing is left to hold back
        self._wake.set()
        self._enough.set()

    async def _write(self) -> None:
        try:
            await self._established.wait()
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._ledger.pending:
                    await self._linger_for_more()
                    if self._ledger.pending:  # else closed or failed meanwhile
                        await self._rpc.write(self._ledger.take())
                if self._ledger.closing:
                    await self._rpc.done_writing()
                    return
        except Exception:  # noqa: BLE001
            # A write fails only on a stream that ended; the reader sees its
            # real status and fails the appends. Nothing awaits this task
            # after a failure, so an exception left in it would only be logged.
            return

    async def _linger_for_more(self) -> None:
        if self._linger <= 0 or self._ledger.enough():
            return
        self._enough.clear()
        try:
            await asyncio.wait_for(self._enough.wait(), self._linger)
        except asyncio.TimeoutError:
            pass

    async def _read(self) -> None:
        await read_outcomes(self._rpc, self._established.set, self._answered, self._fail)

    def _answered(self, msg: session_pb2.AppendOutcomes) -> None:
        for call, outcome in self._ledger.answer(msg):
            _settle(call, outcome)
        self._forget_done()

    def _fail(self, cause: Optional[grpc.aio.AioRpcError], why: str = "closed by the node") -> None:
        left = self._ledger.end(cause, why)
        self._owner._forget(self)
        self._rpc.cancel()
        self._established.set()  # lets the writer see the end
        self._wake.set()
        self._enough.set()
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        self._deadlines.clear()
        for call, err in left:
            _settle(call, error=err)


class AsyncBatchAppender(Appender[_Stream]):
    """Appends of many asyncio tasks over one shared AppendBatches stream.

    :meth:`append` makes one attempt; the client wraps it in its retry
    policy. Create and use it on one event loop.
    """

    def __init__(
        self, channel: grpc.aio.Channel, metadata: Metadata, unary: AsyncUnaryAppend, linger: float = DEFAULT_LINGER
    ) -> None:
        super().__init__(metadata, unary, linger, None)
        self._method = batches_method(channel)

    async def append(self, data: bytes, timeout: Optional[float]) -> session_pb2.AppendResponse:
        """Appends an encoded AppendRequest; raises the node's error, Unavailable (not sent) or OutcomeUnknown."""
        if len(data) > MAX_BATCH_BYTES:
            return await self._unary(data, timeout)
        stream = self._current()
        call = stream.enqueue(data)
        timer = None
        if timeout is not None:
            timer = stream.watch(call, stream._loop.time() + max(timeout, 0))
        try:
            outcome = await call.future
        except asyncio.CancelledError:
            stream.withdraw(call)
            raise
        finally:
            if timer is not None:
                timer.cancel()
        return response(outcome)

    async def close(self) -> None:
        """Refuses later appends; those not sent fail, those sent still get their outcomes."""
        stream = self._take_stream()
        if stream is not None:
            stream.close()
            await asyncio.gather(stream._writer, stream._reader, return_exceptions=True)

    def _current(self) -> _Stream:
        return self._renew(lambda: _Stream(self))

    def _open(self) -> Any:
        return self._method(metadata=self._metadata)
