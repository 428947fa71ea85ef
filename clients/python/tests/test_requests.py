"""Tests of what the client sends: the hand-made wire encoding, the batches' bounds and a stream's end, requests."""

from __future__ import annotations

import unittest

import grpc

from agentstate import appends, errors, ids, wire
from agentstate.build import append_request, encoded_append_request, enum_value, json_object, new_message, state_delta
from agentstate.session.v1 import session_pb2


class WireTest(unittest.TestCase):
    def test_varint_is_protobufs_encoding(self) -> None:
        self.assertEqual(wire.varint(0), b"\x00")  # (proto3 leaves a zero field out)
        for n in (1, 127, 128, 300, 16383, 16384, (1 << 21) - 1, 1 << 21, 1 << 40, (1 << 64) - 1):
            with self.subTest(n=n):
                # TaggedAppend.tag is field 1, a uint64: key 0x08, then the varint.
                self.assertEqual(b"\x08" + wire.varint(n), session_pb2.TaggedAppend(tag=n).SerializeToString())
        with self.assertRaises(ValueError):
            wire.varint(-1)

    def test_hand_made_batch_parses_as_append_batch(self) -> None:
        reqs = [append_request(ids.new_ulid(), [("user", "x" * n)]) for n in (0, 1, 127, 128, 300, 70000)]
        data = b"".join(wire.tagged_append(tag, r.SerializeToString()) for tag, r in zip((1, 127, 128, 300, 1 << 40, 7), reqs))
        batch = wire.decode_batch(data)
        self.assertEqual([a.tag for a in batch.appends], [1, 127, 128, 300, 1 << 40, 7])
        for got, want in zip(batch.appends, reqs):
            self.assertEqual(got.request, want)
        expected = session_pb2.AppendBatch(
            appends=[session_pb2.TaggedAppend(tag=t, request=r) for t, r in zip((1, 127, 128, 300, 1 << 40, 7), reqs)]
        )
        self.assertEqual(data, expected.SerializeToString())


class BatchRulesTest(unittest.TestCase):
    """The rules every append transport (threads, loop, asyncio) shares."""

    class _Pending:
        def __init__(self, tag: int, size: int) -> None:
            self.tag = tag
            self.data = append_request(ids.new_ulid(), [("user", "x" * size)]).SerializeToString()

    def test_take_batch_keeps_one_message_within_its_bounds(self) -> None:
        pending = [self._Pending(t, appends.MAX_BATCH_BYTES // 3) for t in range(5)]
        inflight: dict = {}
        msg, n = appends.take_batch(pending, inflight)
        self.assertEqual(n, 2)  # a third would pass MAX_BATCH_BYTES with its tags
        self.assertEqual([a.tag for a in wire.decode_batch(msg).appends], [0, 1])
        self.assertEqual(sorted(inflight), [0, 1])
        self.assertEqual([c.tag for c in pending], [2, 3, 4])
        many = [self._Pending(t, 1) for t in range(appends.MAX_BATCH_APPENDS + 3)]
        _, n = appends.take_batch(many, {})
        self.assertEqual((n, len(many)), (appends.MAX_BATCH_APPENDS, 3))
        huge = [self._Pending(9, appends.MAX_BATCH_BYTES * 2)]
        _, n = appends.take_batch(huge, {})
        self.assertEqual(n, 1)  # one append alone always goes

    def test_end_errors_tell_unsent_from_unknown_and_pass_refusals(self) -> None:
        class Ended(grpc.RpcError):
            def __init__(self, code: grpc.StatusCode) -> None:
                self._code = code

            def code(self) -> grpc.StatusCode:
                return self._code

            def details(self) -> str:
                return "gone"

            def trailing_metadata(self) -> list:
                return []

        not_sent, unknown = appends.end_errors(Ended(grpc.StatusCode.UNAVAILABLE))
        self.assertIsInstance(not_sent, errors.Unavailable)
        self.assertIsInstance(unknown, errors.OutcomeUnknown)
        self.assertIn("UNAVAILABLE: gone", str(unknown))
        refused, same = appends.end_errors(Ended(grpc.StatusCode.UNAUTHENTICATED))
        self.assertIsInstance(refused, errors.Unauthenticated)
        self.assertIs(refused, same)
        not_sent, unknown = appends.end_errors(None, "append stream failed")
        self.assertIn("append stream failed", str(not_sent))
        self.assertIsInstance(unknown, errors.OutcomeUnknown)


class RequestTest(unittest.TestCase):
    def test_append_request_fills_ids_and_keeps_given_ones(self) -> None:
        given = new_message("assistant", "b", {"k": 1}, message_id="01ARZ3NDEKTSV4RRFFQ69G5FAV")
        req = append_request("S", [("user", "a"), given, session_pb2.NewMessage(role=session_pb2.ROLE_TOOL, content="c")])
        self.assertEqual([m.role for m in req.messages], [session_pb2.ROLE_USER, session_pb2.ROLE_ASSISTANT, session_pb2.ROLE_TOOL])
        self.assertEqual(req.messages[1].message_id, "01ARZ3NDEKTSV4RRFFQ69G5FAV")
        self.assertEqual(req.messages[1].metadata_json, '{"k":1}')
        for m in req.messages:
            self.assertTrue(ids.is_ulid(m.message_id))

    def test_encoded_append_request_is_append_requests_encoding(self) -> None:
        given = new_message("assistant", "b", {"k": 1}, message_id="01ARZ3NDEKTSV4RRFFQ69G5FAV")
        other = new_message("user", "é" * 200, message_id="client-key-7")
        for sid in ("01ARZ3NDEKTSV4RRFFQ69G5FAW", ""):
            with self.subTest(session_id=sid):
                self.assertEqual(
                    encoded_append_request(sid, [given, other]),
                    append_request(sid, [given, other]).SerializeToString(),
                )
        # Messages without ids get new ULIDs; a given NewMessage is not changed.
        bare = session_pb2.NewMessage(role=session_pb2.ROLE_TOOL, content="c")
        data = encoded_append_request("S", [("user", "a", {"x": True}), bare, given])
        req = session_pb2.AppendRequest.FromString(data)
        self.assertEqual(req.session_id, "S")
        self.assertEqual([m.role for m in req.messages], [session_pb2.ROLE_USER, session_pb2.ROLE_TOOL, session_pb2.ROLE_ASSISTANT])
        self.assertEqual(req.messages[0].metadata_json, '{"x":true}')
        self.assertTrue(all(ids.is_ulid(m.message_id) for m in req.messages[:2]))
        self.assertEqual(req.messages[2].message_id, "01ARZ3NDEKTSV4RRFFQ69G5FAV")
        self.assertEqual(bare.message_id, "")
        with self.assertRaises(errors.InvalidArgument):
            encoded_append_request("S", ["not a message"])  # type: ignore[list-item]
        with self.assertRaises(errors.InvalidArgument):
            encoded_append_request("S", [("robot", "x")])
        with self.assertRaises(errors.InvalidArgument):
            encoded_append_request("\udc00", [("user", "x")])

    def test_condition_and_deltas_encode_as_protobuf_does(self) -> None:
        m = new_message("user", "a", message_id="01ARZ3NDEKTSV4RRFFQ69G5FAV")
        scopes = {"app:x": state_delta(set={"k": "v"}, delete=["z"]), "user:x/u": {"n": 1}}
        for expect in (None, 0, 1 << 40):
            with self.subTest(expect=expect):
                got = session_pb2.AppendRequest.FromString(
                    encoded_append_request("S", [m], expect, {"a": [1, None]}, scopes)
                )
                want = append_request("S", [m], expect, {"a": [1, None]}, scopes)
                self.assertEqual(got, want)
                self.assertEqual(got.HasField("expected_next_sequence"), expect is not None)
        self.assertEqual(want.state_delta.set_json["a"], "[1,null]")
        self.assertEqual([s.scope for s in want.scope_deltas], ["app:x", "user:x/u"])
        self.assertEqual(want.scope_deltas[1].delta.set_json["n"], "1")
        for bad in (-1, True, 1.5):
            with self.assertRaises(errors.InvalidArgument):
                encoded_append_request("S", [m], bad)  # type: ignore[arg-type]
        with self.assertRaises(errors.InvalidArgument):
            state_delta(set={1: "x"})  # type: ignore[dict-item]

    def test_enum_names(self) -> None:
        self.assertEqual(enum_value(session_pb2.Role, "ROLE_", "user"), session_pb2.ROLE_USER)
        self.assertEqual(enum_value(session_pb2.Role, "ROLE_", "ROLE_TOOL"), session_pb2.ROLE_TOOL)
        with self.assertRaises(errors.InvalidArgument):
            enum_value(session_pb2.Role, "ROLE_", "robot")
        with self.assertRaises(errors.InvalidArgument):
            json_object(["not", "an", "object"], "metadata")  # type: ignore[arg-type]


# The stubs as imported (the source tree, or the pip-installed package).


if __name__ == "__main__":
    unittest.main()
