"""The batched append stream (AppendBatches) for threads.

Many threads appending through one :class:`BatchAppender` share one
AppendBatches stream: the appends waiting while the stream is busy sending
travel together as one AppendBatch, each under a tag, and each caller waits
for the outcome that comes back under its tag. Outcomes arrive in the order
the node decided them, not the order of the requests; appends in flight
together are not ordered among themselves, so a caller whose appends must
keep their order waits for each one before sending the next (as with
concurrent unary calls).

A failed stream fails the appends waiting on it: Unavailable for those not
sent yet (nothing stored), OutcomeUnknown for those sent (they may have
committed; retrying with the same message ids is safe, the node answers with
the original sequences and duplicate=True). The next append opens a new
stream. A stream the node refused as a whole (wrong token, a node without
AppendBatches) passes its refusal to every append instead.

This module runs the stream on grpcio's blocking API (the Client's
append_transport="threads"); :mod:`agentstate.loop_batch` runs the same
stream on a background event loop (the default, cheaper per append) and
shares its bounds and _Call.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import grpc

from agentstate import errors, wire
from agentstate.connection import Metadata
from agentstate.session.v1 import session_pb2

METHOD = "/agentstate.session.v1.SessionService/AppendBatches"
# Bounds of one AppendBatch, as the Go client's: far below the node's 4 MiB
# receive limit. An append larger than MAX_BATCH_BYTES alone goes as a unary
# Append, which refuses it with the node's own error if it is too large.
MAX_BATCH_BYTES = 1 << 20
MAX_BATCH_APPENDS = 1024
# How long a batch may wait for more appends while many are in flight. In
# Python each stream message costs far more CPU than in Go (tens of µs,
# against one append's few), and that CPU is taken from a node that usually
# shares the machine; callers of appends in flight come back with their
# next append within about one commit, so waiting for them a little makes
# fewer, larger messages. A batch waits only while fewer appends wait than
# are in flight: a lone caller, or one among few, never waits.
DEFAULT_LINGER = 0.002

_REFUSALS = (
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNIMPLEMENTED,
)

# A unary Append of an encoded AppendRequest.
UnaryAppend = Callable[[bytes, Optional[float]], session_pb2.AppendResponse]


def take_batch(pending: List[Any], inflight: Dict[int, Any]) -> Tuple[bytes, int]:
    """Moves the oldest pending calls, within one message's bounds, to inflight.

    Returns the AppendBatch message and how many appends it carries. Every
    transport sends its batches through here, so the bounds are one rule.
    """
    parts: List[bytes] = []
    size = n = 0
    for call in pending:
        if n >= MAX_BATCH_APPENDS or (n > 0 and size + len(call.data) > MAX_BATCH_BYTES):
            break
        part = wire.tagged_append(call.tag, call.data)
        parts.append(part)
        size += len(part)
        inflight[call.tag] = call
        n += 1
    del pending[:n]
    return b"".join(parts), n


def end_errors(cause: Any, why: str = "closed by the node") -> Tuple[errors.AgentStateError, errors.AgentStateError]:
    """The errors of the appends an ended stream leaves: (not sent, sent).

    A stream the node refused as a whole passes its refusal to both. Else an
    append not sent yet is Unavailable (nothing stored) and one sent is
    OutcomeUnknown (it may have committed). cause is the stream's gRPC error
    (blocking or asyncio), or None when it ended without one, for why.
    """
    code = cause.code() if cause is not None else None
    if cause is not None and code in _REFUSALS:
        refusal = errors.from_rpc_error(cause)
        return refusal, refusal
    if cause is not None and code is not None:
        why = f"{code.name}: {cause.details()}"
    return (
        errors.Unavailable(f"append not sent: append stream ended: {why}", grpc_code=code),
        errors.OutcomeUnknown(f"append stream ended before the answer: {why}", grpc_code=code),
    )


class _Call:
    """One append on a stream; ``done`` is held until its outcome is set."""

    __slots__ = ("tag", "data", "done", "outcome", "error")

    def __init__(self, tag: int, data: bytes) -> None:
        self.tag = tag
        self.data = data
        # A pre-acquired lock is the cheapest one-shot signal threading has.
        self.done = threading.Lock()
        self.done.acquire()
        self.outcome: Optional[session_pb2.AppendStreamResponse] = None
        self.error: Optional[errors.AgentStateError] = None

    def finish(
        self,
        outcome: Optional[session_pb2.AppendStreamResponse] = None,
        error: Optional[errors.AgentStateError] = None,
    ) -> None:
        self.outcome, self.error = outcome, error
        self.done.release()

    def result(self) -> session_pb2.AppendResponse:
        if self.error is not None:
            raise self.error
        assert self.outcome is not None
        if self.outcome.HasField("error"):
            raise errors.from_proto(self.outcome.error)
        return self.outcome.response


class _Stream:
    """One AppendBatches stream and the appends on it.

    Invariants: an append is in ``pending`` until the request iterator takes
    it, then in ``inflight`` under its tag until its outcome arrives or the
    stream fails; every call enqueued and not withdrawn is finished exactly
    once; once ``err`` is set nothing is enqueued.
    """

    def __init__(self, owner: "BatchAppender") -> None:
        self._owner = owner
        self._linger = owner._linger
        self._lingering = False
        self._cond = threading.Condition(threading.Lock())
        self._pending: List[_Call] = []
        self._inflight: Dict[int, _Call] = {}
        self._next_tag = 0
        self._closing = False
        # Set once the node's headers arrived: the stream reached its
        # handler. Appends are held back until then, so one failed with the
        # connection was never sent (Unavailable); grpcio takes requests
        # from the iterator before it has a connection to send them on.
        self._established = False
        self.err: Optional[errors.AgentStateError] = None
        self._rpc = owner._open(self._batches())
        self._receiver = threading.Thread(target=self._receive, name="agentstate-append-batches", daemon=True)
        self._receiver.start()

    def enqueue(self, data: bytes) -> _Call:
        with self._cond:
            if self.err is not None:
                raise self.err
            self._next_tag += 1
            call = _Call(self._next_tag, data)
            self._pending.append(call)
            if len(self._pending) == 1 or (self._lingering and self._enough()):
                self._cond.notify()
            return call

    def _enough(self) -> bool:
        return len(self._pending) >= len(self._inflight) or self._closing

    def withdraw(self, call: _Call) -> bool:
        """Takes call back if it was not sent yet; False once it was."""
        with self._cond:
            try:
                self._pending.remove(call)
                return True
            except ValueError:
                # Sent: an outcome arriving later finds no call and is dropped.
                self._inflight.pop(call.tag, None)
                return False

    def close(self) -> None:
        """Ends the stream once the appends already taken are answered; fails those not sent."""
        with self._cond:
            self._closing = True
            pending, self._pending = self._pending, []
            if self.err is None:
                self.err = errors.Unavailable("append batch client is closed")
            err = self.err
            self._cond.notify_all()
        for call in pending:
            call.finish(error=err)

    def _batches(self) -> Iterator[bytes]:
        """The request iterator gRPC's sending thread drains: one batch per wake-up."""
        while True:
            with self._cond:
                while not (self._pending and self._established) and not self._closing:
                    self._cond.wait()
                if not self._pending or not self._established:
                    return
                if self._linger > 0 and not self._enough():
                    self._lingering = True
                    self._cond.wait_for(self._enough, self._linger)
                    self._lingering = False
                    if not self._pending:  # closed or failed meanwhile
                        continue
                batch = self._take()
            yield batch

    def _take(self) -> bytes:
        """Moves the oldest pending appends, within one message's bounds, to inflight."""
        batch, n = take_batch(self._pending, self._inflight)
        self._owner.batches_sent += 1
        self._owner.appends_sent += n
        return batch

    def _receive(self) -> None:
        try:
            # Blocks until the node's headers (it sends them as the stream
            # opens) or the end of a call that never reached it.
            self._rpc.initial_metadata()
            with self._cond:
                if self._rpc.is_active():
                    self._established = True
                    self._cond.notify_all()
            for msg in self._rpc:
                with self._cond:
                    calls = [(self._inflight.pop(o.tag, None), o) for o in msg.outcomes]
                for call, o in calls:
                    if call is not None:
                        call.finish(outcome=o.outcome)
        except grpc.RpcError as e:
            self._fail(e)
            return
        self._fail(None)

    def _fail(self, cause: Optional[grpc.RpcError]) -> None:
        """Fails what the ended stream left: Unavailable if not sent, OutcomeUnknown if sent."""
        not_sent, unknown = end_errors(cause)
        with self._cond:
            if self.err is None:
                self.err = not_sent
            pending, self._pending = self._pending, []
            inflight, self._inflight = self._inflight, {}
            self._closing = True
            self._cond.notify_all()
        self._owner._forget(self)
        if cause is not None:
            self._rpc.cancel()
        for call in pending:
            call.finish(error=not_sent)
        for call in inflight.values():
            call.finish(error=unknown)


class BatchAppender:
    """Appends of many threads over one shared AppendBatches stream. Thread-safe.

    :meth:`append` makes one attempt; the clients wrap it in their retry
    policy. The stream is opened by the first append and again after a
    failure; it outlives the calls whose appends it carries, so the token
    comes from ``metadata`` given here, not from any one call.
    """

    def __init__(
        self, channel: grpc.Channel, metadata: Metadata, unary: UnaryAppend, linger: float = DEFAULT_LINGER
    ) -> None:
        self._method = channel.stream_stream(
            METHOD,
            request_serializer=None,  # batches arrive encoded (wire.tagged_append)
            response_deserializer=session_pb2.AppendOutcomes.FromString,
        )
        self._metadata = metadata
        self._unary = unary
        self._linger = linger
        self._lock = threading.Lock()
        self._stream: Optional[_Stream] = None
        self._closed = False
        # Counters for observing the batching: stream messages and the
        # appends they carried (written under the stream's lock).
        self.batches_sent = 0
        self.appends_sent = 0
        self.streams_opened = 0

    def append(self, data: bytes, timeout: Optional[float]) -> session_pb2.AppendResponse:
        """Appends an encoded AppendRequest; raises the node's error, Unavailable (not sent) or OutcomeUnknown.

        timeout bounds the wait in seconds: past it an append not sent yet is
        withdrawn (Unavailable), one sent is OutcomeUnknown.
        """
        if len(data) > MAX_BATCH_BYTES:
            return self._unary(data, timeout)
        stream = self._current()
        call = stream.enqueue(data)
        if call.done.acquire(timeout=-1 if timeout is None else max(timeout, 0)):
            return call.result()
        if stream.withdraw(call):
            raise errors.Unavailable("append not sent before the deadline")
        if call.done.acquire(blocking=False):  # answered as the deadline passed: the answer wins
            return call.result()
        raise errors.OutcomeUnknown("no append answer before the deadline")

    def close(self) -> None:
        """Refuses later appends; those not sent fail Unavailable, those sent still get outcomes."""
        with self._lock:
            self._closed = True
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

    def _current(self) -> _Stream:
        with self._lock:
            if self._closed:
                raise errors.Unavailable("append batch client is closed")
            if self._stream is None or self._stream.err is not None:
                self._stream = _Stream(self)
                self.streams_opened += 1
            return self._stream

    def _open(self, batches: Iterator[bytes]) -> Any:
        return self._method(batches, metadata=self._metadata)

    def _forget(self, stream: _Stream) -> None:
        with self._lock:
            if self._stream is stream:
                self._stream = None
