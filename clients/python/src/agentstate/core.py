"""What the blocking client's parts share: the channel's stubs, the token, the deadline and retry rules."""

from __future__ import annotations

import time
from typing import Any, Awaitable, Callable, Optional, TypeVar, Union

import grpc
import grpc.aio

from agentstate import errors
from agentstate import retry as retries
from agentstate.audit.v1 import audit_pb2_grpc
from agentstate.connection import auth_metadata
from agentstate.feed.v1 import feed_pb2_grpc
from agentstate.plan.v1 import plan_pb2_grpc
from agentstate.retry import RetryPolicy
from agentstate.session.v1 import session_pb2_grpc

T = TypeVar("T")
Enum = Union[str, int, None]

DEFAULT_TIMEOUT = 30.0
# A method's timeout left unset: the client's default applies.
UNSET: Any = object()


class _Parts:
    """The stubs on one channel (blocking or grpc.aio: the generated stubs serve both), the token, the default deadline."""

    def __init__(self, channel: Any, token: Optional[str], timeout: Optional[float], policy: RetryPolicy) -> None:
        self.channel = channel
        self.metadata = auth_metadata(token)
        self.timeout = timeout
        self.policy = policy
        self.sessions = session_pb2_grpc.SessionServiceStub(channel)
        self.plans = plan_pb2_grpc.PlanServiceStub(channel)
        self.audit = audit_pb2_grpc.AuditServiceStub(channel)
        self.feed = feed_pb2_grpc.FeedServiceStub(channel)

    def deadline(self, timeout: Optional[float]) -> Optional[float]:
        t = self.timeout if timeout is UNSET else timeout
        return None if t is None else time.monotonic() + t


class Core(_Parts):
    """What the blocking client's parts share: its stubs, the token, the deadline and retry rules."""

    def unary(self, method: Callable[..., T], req: Any, timeout: Optional[float], idempotent: bool, write: bool = True) -> T:
        """Calls method(req) under the client's retry policy; one deadline spans all attempts."""

        def attempt(left: Optional[float]) -> T:
            try:
                return method(req, timeout=left, metadata=self.metadata)
            except grpc.RpcError as e:
                err = errors.from_rpc_error(e)
                raise (errors.for_write(err) if write else err) from None

        return retries.call(self.policy, attempt, self.deadline(timeout), idempotent)


class AsyncCore(_Parts):
    """Core, for a grpc.aio channel."""

    async def unary(self, method: Callable[..., Awaitable[T]], req: Any, timeout: Optional[float], idempotent: bool, write: bool = True) -> T:
        async def attempt(left: Optional[float]) -> T:
            try:
                return await method(req, timeout=left, metadata=self.metadata)
            except grpc.aio.AioRpcError as e:
                err = errors.from_rpc_error(e)
                raise (errors.for_write(err) if write else err) from None

        return await retries.call_async(self.policy, attempt, self.deadline(timeout), idempotent)
