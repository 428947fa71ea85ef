"""The core the three append transports share: one append's life on a stream, and what each end of it means.

An append on the AppendBatches stream lives the same way whichever transport
carries it (:mod:`agentstate.batch`: grpcio's blocking stream, for threads;
:mod:`agentstate.loop_batch`: a grpc.aio stream on a background loop, for
threads; :mod:`agentstate.aio_batch`: a grpc.aio stream, for asyncio tasks):
it is pending until a batch takes it, then in flight under its tag until its
outcome arrives or the stream ends. Its outcome, its deadline, the stream's
end, a closed client and a unary Append's failure each mean one thing, said
here once; the transports differ only in how they wait and wake.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any, Callable, ContextManager, Dict, Generic, List, Optional, Tuple, TypeVar

import grpc
import grpc.aio

from agentstate import errors, wire
from agentstate.session.v1 import session_pb2

METHOD = "/agentstate.session.v1.SessionService/AppendBatches"
APPEND_METHOD = "/agentstate.session.v1.SessionService/Append"
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


def response(outcome: session_pb2.AppendStreamResponse) -> session_pb2.AppendResponse:
    """An append's outcome on the stream: its response, or its error raised as the node's code."""
    if outcome.HasField("error"):
        raise errors.from_proto(outcome.error)
    return outcome.response


def unary_error(err: grpc.RpcError) -> errors.AgentStateError:
    """What a failed unary Append means: a write's failure (a broken connection may have stored it)."""
    return errors.for_write(errors.from_rpc_error(err))


def deadline_error(sent: bool) -> errors.AgentStateError:
    """The caller's deadline passed: an append withdrawn unsent stored nothing; one sent may have."""
    if sent:
        return errors.OutcomeUnknown("no append answer before the deadline")
    return errors.Unavailable("append not sent before the deadline")


def closed_error() -> errors.AgentStateError:
    return errors.Unavailable("append batch client is closed")


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


def take_batch(pending: List[Any], inflight: Dict[int, Any]) -> Tuple[bytes, int]:
    """Moves the oldest pending calls, within one message's bounds, to inflight.

    Returns the AppendBatch message and how many appends it carries.
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


C = TypeVar("C")

# A unary Append of an encoded AppendRequest, for appends too large for a batch.
UnaryAppend = Callable[[bytes, Optional[float]], session_pb2.AppendResponse]


def batches_method(channel: Any) -> Any:
    """The AppendBatches method on channel (blocking or grpc.aio): batches go encoded (wire.tagged_append)."""
    return channel.stream_stream(
        METHOD, request_serializer=None, response_deserializer=session_pb2.AppendOutcomes.FromString
    )


async def read_outcomes(
    rpc: Any,
    established: Callable[[], None],
    answered: Callable[[session_pb2.AppendOutcomes], None],
    fail: Callable[[Optional[grpc.aio.AioRpcError], str], None],
) -> None:
    """The reading side of a grpc.aio AppendBatches stream, for both transports that run one.

    established() once the node's headers came (it sends them as the stream
    opens; a call that never reached it ends before); answered(msg) for each
    message; fail(cause, why) exactly once, when the stream ends however it ends.
    """
    try:
        await rpc.initial_metadata()
        if not rpc.done():
            established()
        while True:
            msg = await rpc.read()
            if msg is grpc.aio.EOF:
                break
            answered(msg)
    except grpc.aio.AioRpcError as e:
        fail(e, "")
        return
    except asyncio.CancelledError:
        fail(None, "closed by the node")
        raise
    except Exception as e:  # noqa: BLE001 - a reply that does not decode, say
        fail(None, f"append stream failed: {e!r}")
        return
    fail(None, "closed by the node")


class Counters:
    """What an appender did: streams opened, stream messages sent and the appends they carried."""

    def __init__(self) -> None:
        self.batches_sent = 0
        self.appends_sent = 0
        self.streams_opened = 0


S = TypeVar("S")


class Appender(Counters, Generic[S]):
    """What the three appenders share: one current stream, replaced after it fails, and refusal once closed.

    ``_lock`` guards ``_stream`` and ``_closed`` for the thread transports;
    the asyncio one runs on one loop and needs none.
    """

    def __init__(self, metadata: Any, unary: Any, linger: float, lock: Optional[ContextManager[Any]]) -> None:
        super().__init__()
        self._metadata = metadata
        self._unary = unary
        self._linger = linger
        self._lock: ContextManager[Any] = lock if lock is not None else contextlib.nullcontext()
        self._stream: Optional[S] = None
        self._closed = False

    def _renew(self, make: Callable[[], S]) -> S:
        """The current stream, or a new one when there is none or it failed; under ``_lock``."""
        if self._closed:
            raise closed_error()
        if self._stream is None or self._stream.err is not None:  # type: ignore[attr-defined]
            self._stream = make()
            self.streams_opened += 1
        return self._stream

    def _take_stream(self) -> Optional[S]:
        """Refuses later appends and hands back the current stream, to close; under ``_lock``."""
        self._closed = True
        stream, self._stream = self._stream, None
        return stream

    def _forget(self, stream: S) -> None:
        """A failed stream stops being current (the next append opens another)."""
        with self._lock:
            if self._stream is stream:
                self._stream = None


class ThreadAppender(Appender[S]):
    """The appenders of threads (:mod:`agentstate.batch`, :mod:`agentstate.loop_batch`): their one attempt."""

    def append(self, data: bytes, timeout: Optional[float]) -> session_pb2.AppendResponse:
        """Appends an encoded AppendRequest; raises the node's error, Unavailable (not sent) or OutcomeUnknown.

        timeout bounds the wait in seconds: past it an append not sent yet is
        withdrawn (Unavailable), one sent is OutcomeUnknown.
        """
        if len(data) > MAX_BATCH_BYTES:
            return self._unary(data, timeout)
        stream = self._current()
        return stream.enqueue(data).wait(stream.withdraw, timeout)  # type: ignore[attr-defined]

    def _current(self) -> S:
        raise NotImplementedError


class Ledger(Generic[C]):
    """The appends of one stream and its state; not locked: each transport calls it under its own lock
    (the asyncio one on its one loop).

    Invariants: an append is in ``pending`` until :meth:`take` puts it in a
    batch, then in ``inflight`` under its tag until :meth:`answer` or
    :meth:`end` hands it back; each is handed back at most once, and one
    withdrawn is never; once ``err`` is set nothing is added.
    """

    __slots__ = ("pending", "inflight", "err", "closing", "_next_tag", "_counters")

    def __init__(self, counters: Counters) -> None:
        self.pending: List[C] = []
        self.inflight: Dict[int, C] = {}
        self.err: Optional[errors.AgentStateError] = None
        self.closing = False
        self._next_tag = 0
        self._counters = counters

    def add(self, make: Callable[[int], C]) -> C:
        """Queues the call make(tag) builds; raises the stream's error once it has one."""
        if self.err is not None:
            raise self.err
        self._next_tag += 1
        call = make(self._next_tag)
        self.pending.append(call)
        return call

    def enough(self) -> bool:
        """Whether a lingering batch should go: as many appends wait as are in flight, or the stream closes."""
        return len(self.pending) >= len(self.inflight) or self.closing

    def take(self) -> bytes:
        """The next batch: the oldest pending appends within one message's bounds, now in flight."""
        batch, n = take_batch(self.pending, self.inflight)
        self._counters.batches_sent += 1
        self._counters.appends_sent += n
        return batch

    def withdraw(self, call: Any) -> bool:
        """Takes call back if it was not sent yet; False once it was."""
        try:
            self.pending.remove(call)
            return True
        except ValueError:
            # Sent: an outcome arriving later finds no call and is dropped.
            self.inflight.pop(call.tag, None)  # type: ignore[attr-defined]
            return False

    def answer(self, msg: session_pb2.AppendOutcomes) -> List[Tuple[C, session_pb2.AppendStreamResponse]]:
        """The calls a stream message answers, with their outcomes (tags no longer waited for are dropped)."""
        out = []
        for o in msg.outcomes:
            call = self.inflight.pop(o.tag, None)
            if call is not None:
                out.append((call, o.outcome))
        return out

    def close(self) -> Tuple[List[C], errors.AgentStateError]:
        """Refuses later appends; returns those not sent, to fail with the returned error."""
        self.closing = True
        if self.err is None:
            self.err = closed_error()
        pending, self.pending = self.pending, []
        return pending, self.err

    def end(self, cause: Any, why: str = "closed by the node") -> List[Tuple[C, errors.AgentStateError]]:
        """The stream ended: every call still held, with the error it fails with (see end_errors)."""
        not_sent, unknown = end_errors(cause, why)
        if self.err is None:
            self.err = not_sent
        self.closing = True
        pending, self.pending = self.pending, []
        inflight, self.inflight = self.inflight, {}
        return [(c, not_sent) for c in pending] + [(c, unknown) for c in inflight.values()]


class ThreadCall:
    """One append of a thread; ``done`` is held until its outcome or error is set."""

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
        return response(self.outcome)

    def wait(self, withdraw: Callable[["ThreadCall"], bool], timeout: Optional[float]) -> session_pb2.AppendResponse:
        """Waits for the outcome, at most timeout seconds; past it, withdraws the call if unsent."""
        if self.done.acquire(timeout=-1 if timeout is None else max(timeout, 0)):
            return self.result()
        if withdraw(self):
            raise deadline_error(sent=False)
        # Answered as the deadline passed (the loop transport may hold it,
        # answered, until it wakes it): the answer wins.
        if self.done.acquire(blocking=False) or self.outcome is not None or self.error is not None:
            return self.result()
        raise deadline_error(sent=True)
