"""agentstate: a Python client for the agentstate node's gRPC API.

    from agentstate import Client
    with Client("127.0.0.1:7420") as c:
        s = c.sessions.create("planner").session
        r = c.sessions.append(s.session_id, [("user", "hi"), ("assistant", "hello")])

The generated messages and stubs are agentstate.{common,session,plan,audit,feed}.v1
(``*_pb2``, ``*_pb2_grpc``); the client's results are those messages.
"""

from agentstate.aio import AsyncClient
from agentstate.build import audit_filter, new_message, state_delta
from agentstate.client import Client
from agentstate.connection import TLS
from agentstate.errors import (
    AgentStateError,
    AlreadyExists,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    OutcomeUnknown,
    PermissionDenied,
    ResourceExhausted,
    SequenceMismatch,
    Unauthenticated,
    Unavailable,
)
from agentstate.ids import check_ulid, is_ulid, new_ulid
from agentstate.retry import NO_RETRY, RetryPolicy
from agentstate.tail import AsyncTail, Tail

__version__ = "0.1.0"

__all__ = [
    "AgentStateError",
    "AlreadyExists",
    "AsyncClient",
    "AsyncTail",
    "Client",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "NO_RETRY",
    "NotFound",
    "OutcomeUnknown",
    "PermissionDenied",
    "ResourceExhausted",
    "RetryPolicy",
    "SequenceMismatch",
    "TLS",
    "Tail",
    "Unauthenticated",
    "Unavailable",
    "audit_filter",
    "check_ulid",
    "is_ulid",
    "new_message",
    "new_ulid",
    "state_delta",
]
