"""Tails of a session (FeedService.TailSession): its messages from a sequence, then live, resumed across broken streams.

The node delivers every message from the requested sequence exactly once and
in order; a subscriber that reopens its stream from the last sequence it saw
+ 1 gets the rest, again exactly once. So a tail here keeps that sequence
(``next_sequence``) and, when its stream breaks with an error the retry
policy retries (Unavailable: a restart, a lost connection), reopens from it.
A ``rewound`` event says the messages from its ``from_sequence`` on were
replaced (ReplaceSuffix): drop them; their replacements follow, and a resumed
tail starts there. An ``ended`` event is the node's last word (the session was closed or
deleted, or the node is stopping): it is yielded and the tail stops;
``next_sequence`` is then where to resume, on another node or after the
restart. A tail started from now that breaks before its first message is
reopened from now: messages committed while it was down are not delivered
(start it from a sequence, such as get_state's next_sequence, to have them).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, AsyncIterator, Iterator, Optional

import grpc
import grpc.aio

from agentstate import errors
from agentstate.feed.v1 import feed_pb2
from agentstate.retry import RetryPolicy


class _Cursor:
    """Where a tail stands: the request that resumes it, and the events that move it."""

    def __init__(self, session_id: str, from_sequence: int, from_now: bool, policy: RetryPolicy) -> None:
        if from_sequence < 0:
            raise errors.InvalidArgument(f"from_sequence {from_sequence} is negative")
        self.session_id = session_id
        self.next_sequence = from_sequence
        # Only the first stream starts "from now": a resumed one starts after
        # the last message seen, or it would skip those committed meanwhile.
        self.from_now = from_now
        self.ended = False
        self._policy = policy
        self._waits: Optional[Iterator[float]] = None

    def request(self) -> feed_pb2.TailSessionRequest:
        return feed_pb2.TailSessionRequest(
            session_id=self.session_id, from_sequence=self.next_sequence, from_now=self.from_now
        )

    def see(self, ev: feed_pb2.SessionEvent) -> None:
        kind = ev.WhichOneof("event")
        if kind == "message":
            self.next_sequence = ev.message.sequence + 1
            self.from_now = False
        elif kind == "truncated":
            self.next_sequence = max(self.next_sequence, ev.truncated.to_sequence)
            self.from_now = False
        elif kind == "rewound":
            # A replacement removed the messages from from_sequence on: the
            # new ones follow from there, and a resumed stream starts there.
            self.next_sequence = ev.rewound.from_sequence
            self.from_now = False
        elif kind == "ended":
            self.ended = True
        # An event came: the stream works, so a later failure starts its retries afresh.
        self._waits = None

    def backoff(self, err: errors.AgentStateError) -> float:
        """The wait before reopening after err; raises err when the policy gives up."""
        if self._waits is None:
            self._waits = self._policy.backoffs()
        wait = next(self._waits, None)
        if wait is None or not self._policy.retryable(err, True):
            raise err
        return wait


class _Tail:
    """What both tails show: where they stand.

    Attributes:
        next_sequence: the sequence to resume from (the last message's + 1).
        ended: whether the node ended the tail (its last event was ``ended``).
    """

    def __init__(self, core: Any, session_id: str, from_sequence: int = 0, from_now: bool = False) -> None:
        self._core = core
        self._cursor = _Cursor(session_id, from_sequence, from_now, core.policy)
        self._call: Any = None
        self._cancelled = False

    @property
    def next_sequence(self) -> int:
        return self._cursor.next_sequence

    @property
    def ended(self) -> bool:
        return self._cursor.ended


class Tail(_Tail):
    """A session's events, an iterator; see :meth:`agentstate.sessions.Sessions.tail`."""

    def __init__(self, core: Any, session_id: str, from_sequence: int = 0, from_now: bool = False) -> None:
        super().__init__(core, session_id, from_sequence, from_now)
        self._lock = threading.Lock()

    def cancel(self) -> None:
        """Ends the tail from any thread: the iteration stops without an error."""
        with self._lock:
            self._cancelled = True
            call = self._call
        if call is not None:
            call.cancel()

    def __iter__(self) -> Iterator[feed_pb2.SessionEvent]:
        cur = self._cursor
        while not cur.ended:
            with self._lock:
                if self._cancelled:
                    return
                self._call = self._core.feed.TailSession(cur.request(), metadata=self._core.metadata)
                call = self._call
            try:
                for ev in call:
                    cur.see(ev)
                    yield ev
                    if cur.ended:
                        return
                # The node ends a tail with an ended event; a stream that
                # stops without one was cut, like a failed one.
                err: errors.AgentStateError = errors.Unavailable("tail stream ended without an ended event")
            except grpc.RpcError as e:
                if self._cancelled:
                    return
                err = errors.from_rpc_error(e)
            finally:
                # Leaving the loop early (break, an exception) ends the stream.
                call.cancel()
            time.sleep(cur.backoff(err))


class AsyncTail(_Tail):
    """The asyncio form of :class:`Tail`: an async iterator of the session's events."""

    def cancel(self) -> None:
        """Ends the tail (on its loop): the iteration stops without an error."""
        self._cancelled = True
        if self._call is not None:
            self._call.cancel()

    async def __aiter__(self) -> AsyncIterator[feed_pb2.SessionEvent]:
        cur = self._cursor
        while not cur.ended and not self._cancelled:
            call = self._call = self._core.feed.TailSession(cur.request(), metadata=self._core.metadata)
            try:
                async for ev in call:
                    cur.see(ev)
                    yield ev
                    if cur.ended:
                        return
                err: errors.AgentStateError = errors.Unavailable("tail stream ended without an ended event")
            except (grpc.aio.AioRpcError, asyncio.CancelledError) as e:
                if self._cancelled:
                    return
                if isinstance(e, asyncio.CancelledError):
                    raise
                err = errors.from_rpc_error(e)
            finally:
                call.cancel()
            await asyncio.sleep(cur.backoff(err))
