"""One exception class per agentstate error code (agentstate.common.v1.ErrorCode).

Every failure a client method reports is an :class:`AgentStateError` subclass:
catch the subclass for the code you handle (``except NotFound``) or the base
class for all. Nothing of a failed request was stored, except possibly for
:class:`OutcomeUnknown`.

The node sends each code as the gRPC status code of the same name, except
OUTCOME_UNKNOWN, which gRPC lacks: it travels as DEADLINE_EXCEEDED. A client's
own deadline also ends a call with DEADLINE_EXCEEDED, and means the same thing
(the request may have been applied), so both become :class:`OutcomeUnknown`.
The node also puts an ``agentstate.common.v1.Error`` with the exact code in
every status's details (``grpc-status-details-bin``); when present, that code
wins over the gRPC code and ``code_from_details`` is True. So the node's
OUTCOME_UNKNOWN has ``code_from_details`` set, and a client's own deadline
(or a transport failure, or a node that predates the detail) does not.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Sequence, Tuple, Type

import grpc

from agentstate.common.v1 import common_pb2
from agentstate.session.v1 import session_pb2

ErrorCode = common_pb2.ErrorCode

_ERROR_TYPE_URL_SUFFIX = "/agentstate.common.v1.Error"
_MISMATCH_TYPE_URL_SUFFIX = "/agentstate.session.v1.SequenceMismatch"
# How the node words a refused conditional write (persistence.SequenceMismatchError),
# which is all an append stream's outcome carries of it.
_MISMATCH_MESSAGE = re.compile(r"expected next sequence (-?\d+), but the next sequence is (-?\d+)")


class AgentStateError(Exception):
    """A failure reported by agentstate, or by the transport on its behalf.

    Attributes:
        code: the agentstate code (``common_pb2.ERROR_CODE_*``).
        message: what was wrong, for a human.
        grpc_code: the gRPC status code the failure arrived with; None when
            it did not come from a gRPC status (a batched append's outcome).
        code_from_details: True when ``code`` was read from the status
            details rather than derived from ``grpc_code``.
    """

    code: int = common_pb2.ERROR_CODE_UNSPECIFIED
    # Whether retrying the very same request can succeed without storing
    # anything twice, whatever the request: only when nothing was stored.
    retry_safe: bool = False

    def __init__(
        self,
        message: str,
        *,
        grpc_code: Optional[grpc.StatusCode] = None,
        code_from_details: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.grpc_code = grpc_code
        self.code_from_details = code_from_details

    def __str__(self) -> str:
        return f"{_NAMES.get(self.code, 'unknown')}: {self.message}"


class InvalidArgument(AgentStateError):
    """The request is malformed; retrying it can never succeed."""

    code = common_pb2.ERROR_CODE_INVALID_ARGUMENT


class NotFound(AgentStateError):
    """The named session, plan or entry does not exist."""

    code = common_pb2.ERROR_CODE_NOT_FOUND


class AlreadyExists(AgentStateError):
    """The entity exists already with different fields."""

    code = common_pb2.ERROR_CODE_ALREADY_EXISTS


class FailedPrecondition(AgentStateError):
    """The entity's state refuses the request (a closed session)."""

    code = common_pb2.ERROR_CODE_FAILED_PRECONDITION


class SequenceMismatch(FailedPrecondition):
    """A conditional write (expect=N) found another next sequence; nothing of it was stored.

    Attributes:
        expected_next_sequence: the N the write expected.
        next_sequence: the session's next sequence when the write was refused.
    """

    def __init__(
        self,
        message: str,
        *,
        expected_next_sequence: int,
        next_sequence: int,
        grpc_code: Optional[grpc.StatusCode] = None,
        code_from_details: bool = False,
    ) -> None:
        super().__init__(message, grpc_code=grpc_code, code_from_details=code_from_details)
        self.expected_next_sequence = expected_next_sequence
        self.next_sequence = next_sequence


class ResourceExhausted(AgentStateError):
    """The node's backlog or the database is full; retry later."""

    code = common_pb2.ERROR_CODE_RESOURCE_EXHAUSTED
    retry_safe = True


class Unavailable(AgentStateError):
    """Nothing was stored (not sent, node shutting down, store failed transiently); retry."""

    code = common_pb2.ERROR_CODE_UNAVAILABLE
    retry_safe = True


class Internal(AgentStateError):
    """A bug or an unexpected store failure; nothing was committed."""

    code = common_pb2.ERROR_CODE_INTERNAL


class Unauthenticated(AgentStateError):
    """The call presented no credential the node knows (bearer token, client certificate)."""

    code = common_pb2.ERROR_CODE_UNAUTHENTICATED


class PermissionDenied(AgentStateError):
    """The credentials may read the entity but not do this to it (a reader appending).

    Credentials that may not even read an entity get :class:`NotFound`, as
    for a missing one. Retrying with the same credentials cannot succeed.
    """

    code = common_pb2.ERROR_CODE_PERMISSION_DENIED


class OutcomeUnknown(AgentStateError):
    """The request may or may not have been applied.

    Unlike :class:`Unavailable`, something may have been stored. Retry only
    an idempotent request: appends with message ids, a create with a session
    id, a plan error with a record id (this client fills those in).
    """

    code = common_pb2.ERROR_CODE_OUTCOME_UNKNOWN


_CLASSES: Dict[int, Type["AgentStateError"]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        ResourceExhausted,
        Unavailable,
        Internal,
        Unauthenticated,
        OutcomeUnknown,
        PermissionDenied,
    )
}

_NAMES: Dict[int, str] = {
    common_pb2.ERROR_CODE_INVALID_ARGUMENT: "invalid argument",
    common_pb2.ERROR_CODE_NOT_FOUND: "not found",
    common_pb2.ERROR_CODE_ALREADY_EXISTS: "already exists",
    common_pb2.ERROR_CODE_FAILED_PRECONDITION: "failed precondition",
    common_pb2.ERROR_CODE_RESOURCE_EXHAUSTED: "resource exhausted",
    common_pb2.ERROR_CODE_UNAVAILABLE: "unavailable",
    common_pb2.ERROR_CODE_INTERNAL: "internal",
    common_pb2.ERROR_CODE_UNAUTHENTICATED: "unauthenticated",
    common_pb2.ERROR_CODE_OUTCOME_UNKNOWN: "outcome unknown",
    common_pb2.ERROR_CODE_PERMISSION_DENIED: "permission denied",
}

# The inverse of the node's code mapping (messages/errs: fromGRPCCode). CANCELLED
# is a call this side ended; the node's only CANCELLED is a shutdown's, and
# its UNAVAILABLE meaning is kept.
_FROM_GRPC: Dict[grpc.StatusCode, Type[AgentStateError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.CANCELLED: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: OutcomeUnknown,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
}


def error_class(code: int) -> Type[AgentStateError]:
    """The exception class of an agentstate code (Internal for unknown codes)."""
    return _CLASSES.get(code, Internal)


def from_proto(err: common_pb2.Error) -> AgentStateError:
    """The exception for an ``agentstate.common.v1.Error`` (a batched append's outcome)."""
    if err.code == common_pb2.ERROR_CODE_FAILED_PRECONDITION:
        m = _MISMATCH_MESSAGE.search(err.message)
        if m is not None:
            return SequenceMismatch(err.message, expected_next_sequence=int(m.group(1)), next_sequence=int(m.group(2)))
    cls = error_class(err.code)
    return cls(err.message)


def from_status(
    grpc_code: Optional[grpc.StatusCode],
    details: str,
    trailing_metadata: Optional[Sequence[Tuple[str, object]]] = None,
) -> AgentStateError:
    """The exception for a gRPC status: its details' agentstate code if any, else its gRPC code."""
    detail = _error_detail(trailing_metadata)
    if detail is not None:
        mismatch = _detail(trailing_metadata, _MISMATCH_TYPE_URL_SUFFIX, session_pb2.SequenceMismatch)
        if mismatch is not None and detail.code == common_pb2.ERROR_CODE_FAILED_PRECONDITION:
            return SequenceMismatch(
                detail.message or details,
                expected_next_sequence=mismatch.expected_next_sequence,
                next_sequence=mismatch.next_sequence,
                grpc_code=grpc_code,
                code_from_details=True,
            )
        return error_class(detail.code)(
            detail.message or details, grpc_code=grpc_code, code_from_details=True
        )
    cls = _FROM_GRPC.get(grpc_code, Internal) if grpc_code is not None else Internal
    return cls(details or str(grpc_code), grpc_code=grpc_code)


def from_rpc_error(err: grpc.RpcError) -> AgentStateError:
    """The exception for a failed gRPC call (sync or asyncio)."""
    code = err.code() if hasattr(err, "code") else None  # type: ignore[attr-defined]
    details = err.details() if hasattr(err, "details") else str(err)  # type: ignore[attr-defined]
    trailers = None
    if hasattr(err, "trailing_metadata"):
        try:
            trailers = err.trailing_metadata()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - a failed call may have no trailers to read
            trailers = None
    return from_status(code, details or "", trailers)


def _error_detail(
    trailing_metadata: Optional[Sequence[Tuple[str, object]]],
) -> Optional[common_pb2.Error]:
    """The agentstate Error among a status's details, if the node sent one."""
    return _detail(trailing_metadata, _ERROR_TYPE_URL_SUFFIX, common_pb2.Error)


def _detail(trailing_metadata: Optional[Sequence[Tuple[str, object]]], suffix: str, cls: Type) -> Optional[object]:
    """The detail whose type URL ends in suffix, parsed as cls, if the status carries one.

    grpc-status-details-bin is a serialized google.rpc.Status; its details
    (field 3) are google.protobuf.Any values. It is read with a minimal wire
    decoder because google.rpc's generated code is not a dependency here.
    """
    if not trailing_metadata:
        return None
    for key, value in trailing_metadata:
        if key != "grpc-status-details-bin" or not isinstance(value, bytes):
            continue
        try:
            for any_bytes in _fields(value, 3):
                type_url = b"".join(_fields(any_bytes, 1)).decode("utf-8", "replace")
                if type_url.endswith(suffix):
                    msg = cls()
                    msg.ParseFromString(b"".join(_fields(any_bytes, 2)))
                    return msg
        except Exception:  # noqa: BLE001 - a malformed detail is no detail (ValueError, DecodeError)
            return None
    return None


def _fields(buf: bytes, number: int) -> list:
    """The length-delimited values of field ``number`` in the message ``buf``."""
    out = []
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(buf, i)
        elif wire == 1:
            i += 8
        elif wire == 2:
            size, i = _varint(buf, i)
            if i + size > n:
                raise ValueError("truncated field")
            if field == number:
                out.append(buf[i : i + size])
            i += size
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    if i != n:
        raise ValueError("truncated message")
    return out


def _varint(buf: bytes, i: int) -> Tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def for_write(err: AgentStateError) -> AgentStateError:
    """What a failed write means to its caller.

    The node's own UNAVAILABLE carries its code in the status details and
    promises that nothing was stored. An UNAVAILABLE without that detail is
    grpcio's: the connection failed, possibly after the request was sent and
    even applied (a node killed between its commit and its answer), and
    grpcio cannot say which. For a write that is :class:`OutcomeUnknown`:
    retried only when the request carries its client id.
    """
    if isinstance(err, Unavailable) and not err.code_from_details:
        return OutcomeUnknown(
            f"the connection failed and the request may have been applied: {err}",
            grpc_code=err.grpc_code,
        )
    return err
