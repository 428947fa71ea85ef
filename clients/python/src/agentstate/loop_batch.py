"""The batched append stream for threads, driven by one background event loop.

The same stream as :mod:`agentstate.batch` (appends of many threads share
one AppendBatches stream; each caller waits for the outcome under its tag; a
failed stream fails its appends with Unavailable if not sent, OutcomeUnknown
if sent), with another transport: the stream is a grpc.aio call run by one
event loop in a background thread ("agentstate-io", one per process, shared
by every Client), instead of grpcio's blocking stream.

Why: with the blocking stream every message crosses three grpcio threads
that each need the GIL (the channel's polling thread, the thread draining
the request iterator, the reading thread), so an append cost several thread
wake-ups beside its caller's own, and thread switches, not Python, were most
of its CPU. Here grpcio's poller runs without the GIL and wakes the loop
once for many events; the loop writes, reads and answers, and the only
wake-ups left per append are its caller's. The callers' state is shared with
the loop under one lock, held for a few list operations at a time.

Mixing caveat: grpc.aio binds every event loop that uses it in a process to
one notification socket. A process that also runs grpc.aio (an AsyncClient)
on a loop of its own while a Client that has appended is open gets both
loops woken by each event, and grpcio (an open issue up to 1.7x) logs a
harmless BlockingIOError in the loop that lost the race. The background loop
ignores those; the program's own loop does not, so such a program should
make its Client with append_transport="threads". The loop is closed when the
last Client using it closes.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, List, Optional, Set

import grpc
import grpc.aio

from agentstate import errors
from agentstate.appends import (
    DEFAULT_LINGER,
    Ledger,
    ThreadAppender,
    ThreadCall,
    UnaryAppend,
    batches_method,
    closed_error,
    read_outcomes,
)
from agentstate.connection import Metadata
from agentstate.io_loop import IOLoop
from agentstate.session.v1 import session_pb2

# Bounds how long close() waits for the loop to close the channel.
_CLOSE_WAIT = 5.0
# The chain (see _Stream.enqueue): a chain not passed on for _CHAIN_STALE
# seconds is taken to be held by a caller that stopped appending, and the
# loop wakes the next answered caller itself as outcomes arrive; answered
# callers left waiting when none arrive are woken after _CHAIN_STALL.
_CHAIN_STALE = 0.0005
_CHAIN_STALL = 0.001


class _Stream:
    """One AppendBatches stream: callers' appends in, the loop's writer and reader out.

    Invariants: the appends are a :class:`Ledger`, and all state is under
    ``_lock``; every call enqueued and not withdrawn is finished exactly
    once. The rpc, ``_waiter`` and the tasks belong to the loop.
    """

    def __init__(self, owner: "LoopBatchAppender") -> None:
        self._owner = owner
        self._loop = owner._loop
        self._linger = owner._linger
        self._lock = threading.Lock()
        self._ledger: Ledger[ThreadCall] = Ledger(owner)
        # Set once the node's headers arrived (see batch._Stream): appends
        # are written only after, so one failed with the connection was
        # never sent.
        self._established = False
        # The writer is parked on _waiter; _lingering: with a deadline, for
        # more appends. _kicked: a wake-up is on its way to the loop.
        self._parked = False
        self._lingering = False
        self._kicked = False
        self._waiter: Optional["asyncio.Future[None]"] = None
        # Answered calls not woken yet, and whether a caller woken through
        # the chain has yet to pass it on (see enqueue).
        self._ready: Deque[ThreadCall] = deque()
        self._chained = False
        self._passed_at = 0.0
        self._passes = 0
        self._watch: Optional[asyncio.TimerHandle] = None
        self._watched = -1
        self._rpc: Any = None
        self._loop.call_soon_threadsafe(self._start)

    @property
    def err(self) -> Optional[errors.AgentStateError]:
        return self._ledger.err

    # --- called by the appending threads ---

    def enqueue(self, data: bytes) -> ThreadCall:
        """Queues an append, and wakes the next answered caller: the caller blocks next.

        The loop wakes one answered caller, not all: each woken caller needs
        the GIL, and callers woken together mostly find it taken and sleep
        again, a second thread switch per append. Woken by a caller about to
        block (and so to drop the GIL), the next one usually finds it free.
        The loop itself wakes the next answered caller when the chain was
        not passed on for _CHAIN_STALE (its holder stopped appending), and
        all of them when none was woken for _CHAIN_STALL.
        """
        nxt: Optional[ThreadCall] = None
        with self._lock:
            call = self._ledger.add(lambda tag: ThreadCall(tag, data))
            kick = self._parked and not self._kicked and (not self._lingering or self._ledger.enough())
            if kick:
                self._kicked = True
            if self._ready:
                nxt = self._ready.popleft()
                self._passes += 1
                self._passed_at = time.monotonic()
            else:
                self._chained = False
        if kick:
            self._loop.call_soon_threadsafe(self._wake)
        if nxt is not None:
            nxt.done.release()
        return call

    def withdraw(self, call: ThreadCall) -> bool:
        """Takes call back if it was not sent yet; False once it was."""
        with self._lock:
            return self._ledger.withdraw(call)

    def close(self) -> None:
        """Ends the stream once the appends already sent are answered; fails those not sent."""
        with self._lock:
            pending, err = self._ledger.close()
        self._loop.call_soon_threadsafe(self._wake)
        for call in pending:
            call.finish(error=err)

    # --- run by the loop ---

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _start(self) -> None:
        try:
            self._rpc = self._owner._open()
        except Exception as e:  # noqa: BLE001 - a channel closed meanwhile
            self._fail(None, f"could not open the append stream: {e}")
            return
        self._owner._track(self._loop.create_task(self._write()))
        self._owner._track(self._loop.create_task(self._read()))

    async def _park(self, timeout: Optional[float]) -> None:
        """Waits for a caller's kick (or timeout seconds); _parked was set under the lock."""
        handle = self._loop.call_later(timeout, self._wake) if timeout is not None else None
        try:
            assert self._waiter is not None
            await self._waiter
        finally:
            if handle is not None:
                handle.cancel()
            with self._lock:
                self._parked = self._lingering = False

    async def _write(self) -> None:
        ledger = self._ledger
        lingered = False
        try:
            while True:
                batch: Optional[bytes] = None
                timeout: Optional[float] = None
                with self._lock:
                    self._kicked = False
                    if ledger.closing and not ledger.pending:
                        break
                    if not (ledger.pending and self._established):
                        pass  # park until an append or the headers come
                    elif self._linger > 0 and not lingered and not ledger.enough():
                        self._lingering = True
                        timeout = self._linger
                    else:
                        batch = ledger.take()
                    if batch is None:
                        self._parked = True
                        self._waiter = self._loop.create_future()
                if batch is None:
                    await self._park(timeout)
                    lingered = timeout is not None
                    continue
                lingered = False
                await self._rpc.write(batch)
            await self._rpc.done_writing()
        except Exception:  # noqa: BLE001
            # A write fails only on a stream that ended; the reader sees its
            # real status and fails the appends.
            return

    async def _read(self) -> None:
        await read_outcomes(self._rpc, self._established_now, self._answered, self._fail)

    def _established_now(self) -> None:
        with self._lock:
            self._established = True
        self._wake()

    def _answered(self, msg: session_pb2.AppendOutcomes) -> None:
        head: Optional[ThreadCall] = None
        with self._lock:
            ready = self._ready
            for call, outcome in self._ledger.answer(msg):
                call.outcome = outcome
                ready.append(call)
            if ready:
                now = time.monotonic()
                if not self._chained or now - self._passed_at > _CHAIN_STALE:
                    self._chained = True
                    self._passed_at = now
                    head = ready.popleft()
            # Fewer in flight: a lingering writer may have enough now.
            more = self._lingering and self._ledger.enough()
        if more:
            self._wake()
        if head is not None:
            head.done.release()
        if self._ready and self._watch is None:
            self._watched = self._passes
            self._watch = self._loop.call_later(_CHAIN_STALL, self._unstall)

    def _unstall(self) -> None:
        """Wakes every answered caller if the chain made no progress since the last look."""
        self._watch = None
        stalled: List[ThreadCall] = []
        with self._lock:
            if self._ready and self._passes == self._watched:
                stalled = list(self._ready)
                self._ready.clear()
                self._chained = False
            more = bool(self._ready)
        for call in stalled:
            call.done.release()
        if more:
            self._watched = self._passes
            self._watch = self._loop.call_later(_CHAIN_STALL, self._unstall)

    def _fail(self, cause: Optional[grpc.aio.AioRpcError], why: str = "closed by the node") -> None:
        """Fails what the ended stream left: Unavailable if not sent, OutcomeUnknown if sent."""
        with self._lock:
            left = self._ledger.end(cause, why)
            answered = list(self._ready)
            self._ready.clear()
        self._owner._forget(self)
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        for call in answered:
            call.done.release()
        if cause is not None and self._rpc is not None:
            self._rpc.cancel()
        self._wake()
        for call, err in left:
            call.finish(error=err)


class LoopBatchAppender(ThreadAppender[_Stream]):
    """Appends of many threads over one AppendBatches stream run by the background loop. Thread-safe.

    :meth:`append` makes one attempt; the client wraps it in its retry
    policy. The channel (a grpc.aio channel of its own, opened by
    ``open_channel`` on the loop) is opened by the first append; the stream
    by the first append and again after a failure.
    """

    def __init__(
        self,
        open_channel: Callable[[], grpc.aio.Channel],
        metadata: Metadata,
        unary: UnaryAppend,
        linger: float = DEFAULT_LINGER,
    ) -> None:
        super().__init__(metadata, unary, linger, threading.Lock())
        self._open_channel = open_channel
        self._loop: Any = None
        self._channel: Optional[grpc.aio.Channel] = None
        self._method: Any = None
        self._tasks: Set["asyncio.Task[None]"] = set()  # the loop's

    def close(self) -> None:
        """Refuses later appends; those not sent fail Unavailable, those sent OutcomeUnknown
        unless answered before the channel closes."""
        with self._lock:
            if self._closed:
                return
            stream = self._take_stream()
            channel, self._channel = self._channel, None
        if stream is not None:
            stream.close()
        if channel is not None:
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(channel), self._loop)
            try:
                fut.result(_CLOSE_WAIT)
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
            IOLoop.release()

    async def _shutdown(self, channel: grpc.aio.Channel) -> None:
        # Closing the channel cancels the stream; its reader then fails what
        # is left in flight, and both tasks end before the loop may stop.
        await channel.close()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=_CLOSE_WAIT)

    def _track(self, task: "asyncio.Task[None]") -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _current(self) -> _Stream:
        stream = self._stream
        if stream is not None and stream.err is None and not self._closed:
            return stream  # the common case, without the lock
        with self._lock:
            if self._closed:
                raise closed_error()
            if self._channel is None:
                self._loop = IOLoop.acquire()
                try:
                    self._channel = asyncio.run_coroutine_threadsafe(self._make_channel(), self._loop).result()
                except BaseException:
                    IOLoop.release()
                    raise
            return self._renew(lambda: _Stream(self))

    async def _make_channel(self) -> grpc.aio.Channel:
        # grpc.aio binds a channel to the loop running where it is made.
        channel = self._open_channel()
        self._method = batches_method(channel)
        return channel

    def _open(self) -> Any:
        return self._method(metadata=self._metadata)
