"""In-process fakes of the node's services whose failures are scripted (for test_fake_node)."""

from __future__ import annotations

import threading
from typing import Iterator, List, Optional

import grpc

from agentstate import wire
from agentstate.audit.v1 import audit_pb2, audit_pb2_grpc
from agentstate.common.v1 import common_pb2
from agentstate.session.v1 import session_pb2, session_pb2_grpc


def _field(number: int, value: bytes) -> bytes:
    return bytes([number << 3 | 2]) + wire.varint(len(value)) + value


def answer(req: session_pb2.AppendRequest, base: int = 0, duplicate: bool = False) -> session_pb2.AppendResponse:
    return session_pb2.AppendResponse(
        messages=[session_pb2.AppendedMessage(message_id=m.message_id, sequence=base + i) for i, m in enumerate(req.messages)],
        duplicate=duplicate,
    )


def abort_as_node(context: grpc.ServicerContext, grpc_code: grpc.StatusCode, code: int, message: str) -> None:
    """Ends the call as the node does: the gRPC code, and the exact agentstate code in the details."""
    detail = common_pb2.Error(code=code, message=message)
    any_msg = _field(1, b"type.googleapis.com/agentstate.common.v1.Error") + _field(2, detail.SerializeToString())
    status = b"\x08" + wire.varint(grpc_code.value[0]) + _field(2, message.encode()) + _field(3, any_msg)
    context.set_trailing_metadata((("grpc-status-details-bin", status),))
    context.abort(grpc_code, message)


class FakeSessions(session_pb2_grpc.SessionServiceServicer):
    """Append fails UNAVAILABLE `unary_failures` times; the first `stream_failures`
    AppendBatches streams die after receiving one batch; later ones answer."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.unary_failures = 0
        self.transport_failures = False
        self.usage_calls = 0
        self.stream_failures = 0
        self.stream_refusal = None
        self.silent = False
        # While set, AppendBatches holds its headers back: nothing is sent.
        self.hold_headers: Optional[threading.Event] = None
        self.unary_ids: List[List[str]] = []
        self.stream_ids: List[List[str]] = []
        self.streams = 0
        self.metadata: List[dict] = []

    def Append(self, request: session_pb2.AppendRequest, context: grpc.ServicerContext) -> session_pb2.AppendResponse:
        with self.lock:
            self.unary_ids.append([m.message_id for m in request.messages])
            fail = self.unary_failures > 0
            self.unary_failures -= 1
        if fail:
            if self.transport_failures:
                # What grpcio reports for a connection that broke: no detail.
                context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset")
            abort_as_node(context, grpc.StatusCode.UNAVAILABLE, common_pb2.ERROR_CODE_UNAVAILABLE, "store failed transiently")
        return answer(request)

    def UpdateTokenUsage(self, request: session_pb2.UpdateTokenUsageRequest, context: grpc.ServicerContext) -> session_pb2.UpdateTokenUsageResponse:
        with self.lock:
            self.usage_calls += 1
        context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset")
        raise AssertionError("unreachable")

    def Get(self, request: session_pb2.GetSessionRequest, context: grpc.ServicerContext) -> session_pb2.GetSessionResponse:
        context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset")
        raise AssertionError("unreachable")

    def AppendBatches(self, request_iterator: Iterator[session_pb2.AppendBatch], context: grpc.ServicerContext) -> Iterator[session_pb2.AppendOutcomes]:
        with self.lock:
            self.streams += 1
            self.metadata.append(dict(context.invocation_metadata()))
            die = self.stream_failures > 0
            self.stream_failures -= 1
            refusal = self.stream_refusal
        if refusal is not None:
            context.abort(refusal, "refused")
        if self.hold_headers is not None:
            self.hold_headers.wait(10)
        # As the node does: headers as soon as the stream is open.
        context.send_initial_metadata(())
        for batch in request_iterator:
            with self.lock:
                self.stream_ids.extend([m.message_id for m in a.request.messages] for a in batch.appends)
            if die:
                context.abort(grpc.StatusCode.UNAVAILABLE, "member died holding the appends")
            if self.silent:
                continue
            yield session_pb2.AppendOutcomes(
                outcomes=[
                    session_pb2.TaggedOutcome(tag=a.tag, outcome=session_pb2.AppendStreamResponse(response=answer(a.request)))
                    for a in batch.appends
                ]
            )


class FakeAudit(audit_pb2_grpc.AuditServiceServicer):
    def __init__(self) -> None:
        self.records = 0
        self.event_ids: List[str] = []
        self.release = threading.Event()

    def Count(self, request: audit_pb2.CountRequest, context: grpc.ServicerContext) -> audit_pb2.CountResponse:
        # Never answers in time: the client's own deadline ends the call.
        self.release.wait(10)
        return audit_pb2.CountResponse()

    def Verify(self, request: audit_pb2.VerifyRequest, context: grpc.ServicerContext) -> audit_pb2.VerifyResponse:
        # What the node sends for OUTCOME_UNKNOWN: DEADLINE_EXCEEDED with the exact code in the details.
        abort_as_node(context, grpc.StatusCode.DEADLINE_EXCEEDED, common_pb2.ERROR_CODE_OUTCOME_UNKNOWN, "commit answer lost")
        raise AssertionError("unreachable")

    def Record(self, request: audit_pb2.RecordRequest, context: grpc.ServicerContext) -> audit_pb2.RecordResponse:
        self.records += 1
        self.event_ids.append(request.event_id)
        abort_as_node(context, grpc.StatusCode.DEADLINE_EXCEEDED, common_pb2.ERROR_CODE_OUTCOME_UNKNOWN, "commit answer lost")
        raise AssertionError("unreachable")
