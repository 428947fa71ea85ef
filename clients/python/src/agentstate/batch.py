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
stream on a background event loop (the default, cheaper per append). What
an append's outcome, deadline and stream end mean, and its bookkeeping, are
:mod:`agentstate.appends`', shared by the three transports.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator, Optional

import grpc

from agentstate import errors
from agentstate.appends import (
    DEFAULT_LINGER,
    Ledger,
    ThreadAppender,
    ThreadCall,
    UnaryAppend,
    batches_method,
)
from agentstate.connection import Metadata


class _Stream:
    """One AppendBatches stream on grpcio's blocking API; its appends are a :class:`Ledger` under ``_cond``."""

    def __init__(self, owner: "BatchAppender") -> None:
        self._owner = owner
        self._linger = owner._linger
        self._lingering = False
        self._cond = threading.Condition(threading.Lock())
        self._ledger: Ledger[ThreadCall] = Ledger(owner)
        # Set once the node's headers arrived: the stream reached its
        # handler. Appends are held back until then, so one failed with the
        # connection was never sent (Unavailable); grpcio takes requests
        # from the iterator before it has a connection to send them on.
        self._established = False
        self._rpc = owner._open(self._batches())
        self._receiver = threading.Thread(target=self._receive, name="agentstate-append-batches", daemon=True)
        self._receiver.start()

    @property
    def err(self) -> Optional[errors.AgentStateError]:
        return self._ledger.err

    def enqueue(self, data: bytes) -> ThreadCall:
        with self._cond:
            call = self._ledger.add(lambda tag: ThreadCall(tag, data))
            if len(self._ledger.pending) == 1 or (self._lingering and self._ledger.enough()):
                self._cond.notify()
            return call

    def withdraw(self, call: ThreadCall) -> bool:
        with self._cond:
            return self._ledger.withdraw(call)

    def close(self) -> None:
        """Ends the stream once the appends already taken are answered; fails those not sent."""
        with self._cond:
            pending, err = self._ledger.close()
            self._cond.notify_all()
        for call in pending:
            call.finish(error=err)

    def _batches(self) -> Iterator[bytes]:
        """The request iterator gRPC's sending thread drains: one batch per wake-up."""
        ledger = self._ledger
        while True:
            with self._cond:
                while not (ledger.pending and self._established) and not ledger.closing:
                    self._cond.wait()
                if not ledger.pending or not self._established:
                    return
                if self._linger > 0 and not ledger.enough():
                    self._lingering = True
                    self._cond.wait_for(ledger.enough, self._linger)
                    self._lingering = False
                    if not ledger.pending:  # closed or failed meanwhile
                        continue
                batch = ledger.take()
            yield batch

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
                    answered = self._ledger.answer(msg)
                for call, outcome in answered:
                    call.finish(outcome=outcome)
        except grpc.RpcError as e:
            self._fail(e)
            return
        self._fail(None)

    def _fail(self, cause: Optional[grpc.RpcError]) -> None:
        """Fails what the ended stream left: Unavailable if not sent, OutcomeUnknown if sent."""
        with self._cond:
            left = self._ledger.end(cause)
            self._cond.notify_all()
        self._owner._forget(self)
        if cause is not None:
            self._rpc.cancel()
        for call, err in left:
            call.finish(error=err)


class BatchAppender(ThreadAppender[_Stream]):
    """Appends of many threads over one shared AppendBatches stream. Thread-safe.

    ``append`` makes one attempt; the clients wrap it in their retry
    policy. The stream is opened by the first append and again after a
    failure; it outlives the calls whose appends it carries, so the token
    comes from ``metadata`` given here, not from any one call. Its counters
    (batches_sent, appends_sent, streams_opened) show the batching.
    """

    def __init__(
        self, channel: grpc.Channel, metadata: Metadata, unary: UnaryAppend, linger: float = DEFAULT_LINGER
    ) -> None:
        super().__init__(metadata, unary, linger, threading.Lock())
        self._method = batches_method(channel)

    def close(self) -> None:
        """Refuses later appends; those not sent fail Unavailable, those sent still get outcomes."""
        with self._lock:
            stream = self._take_stream()
        if stream is not None:
            stream.close()

    def _current(self) -> _Stream:
        with self._lock:
            return self._renew(lambda: _Stream(self))

    def _open(self, batches: Iterator[bytes]) -> Any:
        return self._method(batches, metadata=self._metadata)
