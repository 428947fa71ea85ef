"""Tests of the parts that need no node: ids, error mapping, the stubs, the background loop, retries (requests: test_requests)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import unittest
from pathlib import Path
from typing import List, Optional

import grpc

from agentstate import errors, ids, wire
from agentstate.common.v1 import common_pb2
from agentstate.retry import RetryPolicy, call
from agentstate.session.v1 import session_pb2


class ULIDTest(unittest.TestCase):
    def test_new_ids_are_canonical_and_ordered(self) -> None:
        made = [ids.new_ulid() for _ in range(2000)]
        for u in made:
            self.assertTrue(ids.is_ulid(u), u)
            self.assertEqual(len(u), 26)
            self.assertEqual(u, u.upper())
        self.assertEqual(made, sorted(made), "ids made in a burst must sort in creation order")
        self.assertEqual(len(set(made)), len(made))

    def test_ids_from_many_threads_are_unique(self) -> None:
        out: List[str] = []
        lock = threading.Lock()

        def make() -> None:
            mine = [ids.new_ulid() for _ in range(500)]
            with lock:
                out.extend(mine)

        ts = [threading.Thread(target=make) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(len(set(out)), 4000)

    def test_timestamp_is_now(self) -> None:
        before = time.time_ns() // 1_000_000
        u = ids.new_ulid()
        after = time.time_ns() // 1_000_000
        self.assertTrue(before <= ids.timestamp_ms(u) <= after + 1)

    def test_encode_is_crockford_base32_of_the_value(self) -> None:
        # A reference made another way: RFC 4648 base32 of the value's 130
        # bits (two zero bits first), mapped to Crockford's alphabet.
        import base64
        import random

        crockford = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", ids.ALPHABET.encode())
        rng = random.Random(20)
        values = [0, 1, 31, 32, 1023, 1024, (1 << 80) - 1, 1 << 80, (1 << 128) - 1]
        values += [rng.getrandbits(128) for _ in range(2000)] + [rng.getrandbits(rng.randrange(1, 129)) for _ in range(2000)]
        for v in values:
            want = base64.b32encode(v.to_bytes(20, "big"))[6:].translate(crockford).decode("ascii")
            self.assertEqual(ids.encode(v), want, v)
        for bad in (-1, 1 << 128):
            with self.assertRaises(ValueError):
                ids.encode(bad)

    def test_encode_decode_round_trip(self) -> None:
        for v in (0, 1, (1 << 128) - 1, 0x0123456789ABCDEF0123456789ABCDEF):
            self.assertEqual(ids.decode(ids.encode(v)), v)
        self.assertEqual(ids.encode(0), "0" * 26)
        self.assertEqual(ids.encode((1 << 128) - 1), "7" + "Z" * 25)

    def test_rejects_what_the_node_rejects(self) -> None:
        good = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
        self.assertTrue(ids.is_ulid(good))
        for bad in (
            good.lower(),  # the node wants upper case
            good[:-1],  # too short
            good + "0",  # too long
            "8" + good[1:],  # overflows 128 bits
            good[:-1] + "I",  # not Crockford (I, L, O, U are excluded)
            good[:-1] + "U",
            "",
        ):
            self.assertFalse(ids.is_ulid(bad), bad)
            with self.assertRaises(errors.InvalidArgument):
                ids.check_ulid("message_id", bad)


class ErrorMappingTest(unittest.TestCase):
    def test_each_grpc_code_maps_to_its_class(self) -> None:
        cases = {
            grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidArgument,
            grpc.StatusCode.NOT_FOUND: errors.NotFound,
            grpc.StatusCode.ALREADY_EXISTS: errors.AlreadyExists,
            grpc.StatusCode.FAILED_PRECONDITION: errors.FailedPrecondition,
            grpc.StatusCode.RESOURCE_EXHAUSTED: errors.ResourceExhausted,
            grpc.StatusCode.UNAVAILABLE: errors.Unavailable,
            grpc.StatusCode.UNAUTHENTICATED: errors.Unauthenticated,
            grpc.StatusCode.PERMISSION_DENIED: errors.PermissionDenied,
            grpc.StatusCode.DEADLINE_EXCEEDED: errors.OutcomeUnknown,
            grpc.StatusCode.INTERNAL: errors.Internal,
            grpc.StatusCode.UNKNOWN: errors.Internal,
        }
        for code, cls in cases.items():
            e = errors.from_status(code, "why")
            self.assertIs(type(e), cls, code)
            self.assertEqual(e.grpc_code, code)
            self.assertFalse(e.code_from_details)
            self.assertEqual(e.message, "why")

    def test_outcome_unknown_is_not_unavailable(self) -> None:
        self.assertFalse(issubclass(errors.OutcomeUnknown, errors.Unavailable))
        self.assertFalse(issubclass(errors.Unavailable, errors.OutcomeUnknown))
        self.assertFalse(errors.OutcomeUnknown.retry_safe)
        self.assertTrue(errors.Unavailable.retry_safe)

    def test_every_code_has_one_class(self) -> None:
        codes = [v for v in common_pb2.ErrorCode.values() if v != common_pb2.ERROR_CODE_UNSPECIFIED]
        classes = {errors.error_class(c) for c in codes}
        self.assertEqual(len(classes), len(codes))
        for c in codes:
            self.assertEqual(errors.error_class(c).code, c)

    def test_details_code_wins_over_grpc_code(self) -> None:
        detail = common_pb2.Error(code=common_pb2.ERROR_CODE_OUTCOME_UNKNOWN, message="commit answer lost")
        any_msg = b"".join(
            (b"\x0a", wire.varint(len(b"type.googleapis.com/agentstate.common.v1.Error")),
             b"type.googleapis.com/agentstate.common.v1.Error",
             b"\x12", wire.varint(detail.ByteSize()), detail.SerializeToString())
        )
        status = b"\x08\x04" + b"\x1a" + wire.varint(len(any_msg)) + any_msg  # code=4, details=[any]
        e = errors.from_status(grpc.StatusCode.DEADLINE_EXCEEDED, "x", [("grpc-status-details-bin", status)])
        self.assertIsInstance(e, errors.OutcomeUnknown)
        self.assertTrue(e.code_from_details)
        self.assertEqual(e.message, "commit answer lost")
        # A detail of another type, or garbage, leaves the gRPC code in charge.
        e = errors.from_status(grpc.StatusCode.NOT_FOUND, "x", [("grpc-status-details-bin", b"\xff\xff")])
        self.assertIsInstance(e, errors.NotFound)
        self.assertFalse(e.code_from_details)

    def test_from_proto(self) -> None:
        e = errors.from_proto(common_pb2.Error(code=common_pb2.ERROR_CODE_FAILED_PRECONDITION, message="closed"))
        self.assertIsInstance(e, errors.FailedPrecondition)
        self.assertNotIsInstance(e, errors.SequenceMismatch)
        self.assertIn("failed precondition: closed", str(e))

    def test_sequence_mismatch_from_the_detail_or_the_message(self) -> None:
        # A stream's outcome carries only the common Error: its message has the numbers.
        msg = "session S: expected next sequence 3, but the next sequence is 7"
        e = errors.from_proto(common_pb2.Error(code=common_pb2.ERROR_CODE_FAILED_PRECONDITION, message=msg))
        self.assertIsInstance(e, errors.SequenceMismatch)
        self.assertIsInstance(e, errors.FailedPrecondition)
        self.assertEqual((e.expected_next_sequence, e.next_sequence), (3, 7))
        # A status carries the SequenceMismatch detail beside the common Error.
        def any_of(name: str, m: bytes) -> bytes:
            url = f"type.googleapis.com/{name}".encode()
            inner = b"\x0a" + wire.varint(len(url)) + url + b"\x12" + wire.varint(len(m)) + m
            return b"\x1a" + wire.varint(len(inner)) + inner

        err = common_pb2.Error(code=common_pb2.ERROR_CODE_FAILED_PRECONDITION, message="refused").SerializeToString()
        mm = session_pb2.SequenceMismatch(session_id="S", expected_next_sequence=4, next_sequence=9).SerializeToString()
        status = b"\x08\x09" + any_of("agentstate.common.v1.Error", err) + any_of("agentstate.session.v1.SequenceMismatch", mm)
        e = errors.from_status(grpc.StatusCode.FAILED_PRECONDITION, "x", [("grpc-status-details-bin", status)])
        self.assertIsInstance(e, errors.SequenceMismatch)
        self.assertTrue(e.code_from_details)
        self.assertEqual((e.expected_next_sequence, e.next_sequence), (4, 9))


import agentstate  # noqa: E402

PACKAGES = Path(agentstate.__file__).resolve().parent.parent
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
STUB_MODULES = [
    "agentstate.common.v1.common_pb2",
    "agentstate.session.v1.session_pb2",
    "agentstate.session.v1.session_pb2_grpc",
    "agentstate.plan.v1.plan_pb2",
    "agentstate.plan.v1.plan_pb2_grpc",
    "agentstate.audit.v1.audit_pb2",
    "agentstate.audit.v1.audit_pb2_grpc",
    "agentstate.feed.v1.feed_pb2",
    "agentstate.feed.v1.feed_pb2_grpc",
]


def _floor(requirement: str) -> tuple:
    """The ">=" floor pyproject.toml declares for a dependency, as a version tuple."""
    text = PYPROJECT.read_text()
    m = re.search(r'"%s>=([0-9.]+)' % re.escape(requirement), text)
    assert m, f"pyproject.toml declares no {requirement}>= floor"
    return tuple(int(x) for x in m.group(1).split("."))


class StubCompatibilityTest(unittest.TestCase):
    """The committed stubs must load on the oldest runtimes pyproject.toml allows."""

    def test_stubs_demand_no_newer_runtime_than_the_declared_floor(self) -> None:
        # protobuf 5.26+ and grpcio-tools 1.63+ write a runtime version check
        # into what they generate, failing (or warning) at import on an older
        # runtime. Stubs regenerated with newer tools would break the floor
        # (Debian 12's protobuf 4.21 and grpcio 1.51); see generate.sh.
        pb_floor, grpc_floor = _floor("protobuf"), _floor("grpcio")
        for mod in STUB_MODULES:
            text = (PACKAGES / (mod.replace(".", "/") + ".py")).read_text()
            with self.subTest(module=mod):
                m = re.search(r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.\w+,\s*(\d+),\s*(\d+),\s*(\d+)", text)
                if m:
                    self.assertLessEqual(tuple(int(x) for x in m.groups())[: len(pb_floor)], pb_floor)
                g = re.search(r"GRPC_GENERATED_VERSION = '([0-9.]+)", text)
                if g:
                    self.assertLessEqual(tuple(int(x) for x in g.group(1).split(".")[:2]), grpc_floor[:2])

    def test_stubs_load_on_the_pure_python_protobuf_without_warnings(self) -> None:
        # The generated modules take another path when protobuf has no C
        # descriptors (its pure-Python backend); -W error turns any warning
        # at import (a deprecation, a version notice) into a failure.
        script = "; ".join(
            [f"import {m}" for m in STUB_MODULES]
            + [
                "from agentstate.session.v1 import session_pb2 as s",
                "r = s.AppendRequest(session_id='S', messages=[s.NewMessage(role=s.ROLE_USER, content='é')])",
                "assert s.AppendRequest.FromString(r.SerializeToString()) == r",
                "from google.protobuf.internal import api_implementation as a",
                "print(a.Type())",
            ]
        )
        env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python", PYTHONPATH=str(PACKAGES))
        out = subprocess.run([sys.executable, "-W", "error", "-c", script], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "python")


class BackgroundLoopTest(unittest.TestCase):
    def test_transport_is_checked_and_chosen(self) -> None:
        from agentstate import Client
        from agentstate.batch import BatchAppender
        from agentstate.loop_batch import LoopBatchAppender

        with self.assertRaises(ValueError):
            Client("127.0.0.1:1", append_transport="fibers")
        with self.assertRaises(ValueError):
            Client("127.0.0.1:1", append_transport="fibers", batched_appends=False)
        for transport, kind in (("loop", LoopBatchAppender), ("threads", BatchAppender)):
            with Client("127.0.0.1:1", append_transport=transport) as c:
                self.assertIsInstance(c.sessions.appender, kind)
        with Client("127.0.0.1:1") as c:
            self.assertIsInstance(c.sessions.appender, LoopBatchAppender, "the loop is the default")
        # A Client that never appended starts no background loop.
        self.assertEqual([t for t in threading.enumerate() if t.name == "agentstate-io"], [])

    def test_only_the_pollers_lost_race_is_ignored(self) -> None:
        from agentstate.io_loop import ignore_poller_race as _ignore_poller_race

        seen: List[dict] = []

        class Loop:
            def default_exception_handler(self, context: dict) -> None:
                seen.append(context)

        class Handle:
            def __repr__(self) -> str:
                return "<Handle PollerCompletionQueue._handle_events()>"

        race = {"exception": BlockingIOError(11, "Resource temporarily unavailable"), "handle": Handle()}
        _ignore_poller_race(Loop(), race)  # type: ignore[arg-type]
        self.assertEqual(seen, [])
        other = {"exception": BlockingIOError(11, "elsewhere"), "handle": "<Handle other()>"}
        failed = {"exception": ValueError("a bug"), "handle": Handle()}
        _ignore_poller_race(Loop(), other)  # type: ignore[arg-type]
        _ignore_poller_race(Loop(), failed)  # type: ignore[arg-type]
        self.assertEqual(seen, [other, failed])


class RetryTest(unittest.TestCase):
    policy = RetryPolicy(attempts=4, initial_backoff=0.001, max_backoff=0.002)

    def run_failing(self, err: errors.AgentStateError, idempotent: bool, succeed_on: Optional[int] = None) -> int:
        seen = []

        def attempt(timeout: Optional[float]) -> str:
            seen.append(timeout)
            if succeed_on is not None and len(seen) == succeed_on:
                return "ok"
            raise err

        try:
            self.assertEqual(call(self.policy, attempt, None, idempotent), "ok")
        except errors.AgentStateError as e:
            self.assertIs(e, err)
        return len(seen)

    def test_unavailable_is_retried_a_bounded_number_of_times(self) -> None:
        self.assertEqual(self.run_failing(errors.Unavailable("down"), idempotent=False), 4)
        self.assertEqual(self.run_failing(errors.Unavailable("down"), idempotent=False, succeed_on=3), 3)

    def test_outcome_unknown_is_retried_only_when_idempotent(self) -> None:
        self.assertEqual(self.run_failing(errors.OutcomeUnknown("lost"), idempotent=False), 1)
        self.assertEqual(self.run_failing(errors.OutcomeUnknown("lost"), idempotent=True), 4)

    def test_other_errors_are_not_retried(self) -> None:
        self.assertEqual(self.run_failing(errors.InvalidArgument("bad"), idempotent=True), 1)

    def test_deadline_bounds_the_retries(self) -> None:
        slow = RetryPolicy(attempts=100, initial_backoff=0.05, max_backoff=0.05)
        n = 0

        def attempt(timeout: Optional[float]) -> None:
            nonlocal n
            n += 1
            raise errors.Unavailable("down")

        start = time.monotonic()
        with self.assertRaises(errors.Unavailable):
            call(slow, attempt, time.monotonic() + 0.2, False)
        self.assertLess(time.monotonic() - start, 1.0)
        self.assertLess(n, 20)

    def test_backoff_grows_to_the_cap(self) -> None:
        waits = list(RetryPolicy(attempts=8, initial_backoff=0.1, max_backoff=0.4).backoffs())
        self.assertEqual(len(waits), 7)
        self.assertTrue(all(0.05 <= w <= 0.4 for w in waits))
        self.assertGreater(waits[-1], 0.1)


if __name__ == "__main__":
    unittest.main()


class AuditFilterTest(unittest.TestCase):
    def test_principal_and_namespace_reach_the_filter(self) -> None:
        from agentstate import audit_filter

        f = audit_filter(actor_name="bot", principal="alice", namespace="team-a")
        self.assertEqual((f.actor_name, f.principal, f.namespace), ("bot", "alice", "team-a"))
        self.assertEqual(audit_filter().principal, "")


class TailCursorTest(unittest.TestCase):
    """A tail's cursor follows messages, truncations and rewinds."""

    def test_rewound_moves_the_cursor_back_to_the_cut(self) -> None:
        from agentstate.feed.v1 import feed_pb2
        from agentstate.tail import _Cursor

        cur = _Cursor("s", 0, False, RetryPolicy())
        for seq in range(5):
            cur.see(feed_pb2.SessionEvent(message=session_pb2.Message(sequence=seq)))
        self.assertEqual(cur.next_sequence, 5)
        cur.see(feed_pb2.SessionEvent(rewound=feed_pb2.Rewound(from_sequence=3, previous_next_sequence=5)))
        self.assertEqual(cur.next_sequence, 3)
        self.assertEqual(cur.request().from_sequence, 3)
        cur.see(feed_pb2.SessionEvent(message=session_pb2.Message(sequence=3)))
        self.assertEqual(cur.next_sequence, 4)
