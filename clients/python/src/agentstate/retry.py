"""Bounded retries with exponential backoff and jitter.

Only failures that promise nothing was stored (UNAVAILABLE) are retried for
every call; OUTCOME_UNKNOWN is retried only for calls whose ids make a second
attempt harmless (appends, creates, plan errors with their ids). Every
attempt of one call sends the same request, ids included.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterator, Optional, Tuple, Type, TypeVar

from agentstate.errors import AgentStateError, OutcomeUnknown, Unavailable

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How a client retries a failed call.

    Attributes:
        attempts: most attempts per call, the first included (1: no retries).
        initial_backoff: seconds before the second attempt.
        max_backoff: cap on the seconds between attempts.
        multiplier: growth of the backoff per attempt.
        retry_on: the exception classes retried for every call.
    """

    attempts: int = 5
    initial_backoff: float = 0.05
    max_backoff: float = 2.0
    multiplier: float = 2.0
    retry_on: Tuple[Type[AgentStateError], ...] = (Unavailable,)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")

    def backoffs(self) -> Iterator[float]:
        """The waits before attempts 2..attempts: full jitter over a growing cap."""
        cap = self.initial_backoff
        for _ in range(self.attempts - 1):
            # Full jitter keeps many callers that failed together (a node
            # restart) from returning together.
            yield random.uniform(cap / 2, cap)
            cap = min(cap * self.multiplier, self.max_backoff)

    def retryable(self, err: AgentStateError, idempotent: bool) -> bool:
        return isinstance(err, self.retry_on) or (idempotent and isinstance(err, OutcomeUnknown))


NO_RETRY = RetryPolicy(attempts=1)


def _remaining(deadline: Optional[float]) -> Optional[float]:
    # Never negative: grpcio reads a negative timeout as none at all.
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


def call(
    policy: RetryPolicy,
    attempt: Callable[[Optional[float]], T],
    deadline: Optional[float],
    idempotent: bool,
) -> T:
    """Runs attempt(timeout) until it succeeds, fails for good, or the deadline passes."""
    waits: Optional[Iterator[float]] = None  # made on the first failure: most calls have none
    while True:
        try:
            return attempt(_remaining(deadline))
        except AgentStateError as err:
            if waits is None:
                waits = policy.backoffs()
            wait = next(waits, None)
            left = _remaining(deadline)
            if wait is None or not policy.retryable(err, idempotent) or (left is not None and left <= wait):
                raise
            time.sleep(wait)


async def call_async(
    policy: RetryPolicy,
    attempt: Callable[[Optional[float]], Awaitable[T]],
    deadline: Optional[float],
    idempotent: bool,
) -> T:
    """The asyncio form of :func:`call`."""
    waits: Optional[Iterator[float]] = None
    while True:
        try:
            return await attempt(_remaining(deadline))
        except AgentStateError as err:
            if waits is None:
                waits = policy.backoffs()
            wait = next(waits, None)
            left = _remaining(deadline)
            if wait is None or not policy.retryable(err, idempotent) or (left is not None and left <= wait):
                raise
            await asyncio.sleep(wait)
