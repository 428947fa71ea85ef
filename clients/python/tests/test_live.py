"""The client against a real node (bin/node serve on a temp SQLite file)."""

from __future__ import annotations

import contextlib
import io
import json
import threading
import unittest
from typing import Dict, List, Optional, Tuple

import grpc

from agentstate import Client, RetryPolicy, errors, new_message, new_ulid
from agentstate.audit.v1 import audit_pb2
from agentstate.plan.v1 import plan_pb2
from tests.node import REPO, Node

node: Optional[Node] = None


def setUpModule() -> None:
    global node
    node = Node()


def tearDownModule() -> None:
    if node is not None:
        node.stop()


class LiveTest(unittest.TestCase):
    def setUp(self) -> None:
        assert node is not None
        self.client = Client(node.grpc_addr, timeout=20)
        self.addCleanup(self.client.close)


class SessionsTest(LiveTest):
    def test_create_get_append_list(self) -> None:
        c = self.client
        created = c.sessions.create("planner", metadata={"team": "py"})
        self.assertTrue(created.created)
        sid = created.session.session_id
        again = c.sessions.create("planner", session_id=sid, metadata={"team": "py"})
        self.assertFalse(again.created, "creating an existing id with the same fields is a no-op")

        r = c.sessions.append(sid, [("user", "hi", {"lang": "en"}), ("assistant", "hello")])
        self.assertEqual([m.sequence for m in r.messages], [0, 1])
        self.assertFalse(r.duplicate)
        got = c.sessions.get(sid)
        self.assertEqual(got.message_count, 2)
        self.assertEqual(json.loads(got.metadata_json), {"team": "py"})
        msgs = list(c.sessions.iter_messages(sid))
        self.assertEqual([(m.sequence, m.content) for m in msgs], [(0, "hi"), (1, "hello")])
        self.assertEqual(json.loads(msgs[0].metadata_json), {"lang": "en"})

    def test_sixteen_threads_on_one_batched_stream_get_dense_sequences(self) -> None:
        c = self.client
        sid = c.sessions.create("swarm").session.session_id
        per_thread = 40
        acks: Dict[int, List[Tuple[int, str]]] = {}
        failures: List[BaseException] = []
        start = threading.Barrier(16)

        def worker(i: int) -> None:
            mine: List[Tuple[int, str]] = []
            try:
                start.wait()
                for k in range(per_thread):
                    m = new_message("user", f"thread {i} message {k}")
                    r = c.sessions.append(sid, [m])
                    self.assertEqual(r.messages[0].message_id, m.message_id)
                    mine.append((r.messages[0].sequence, m.message_id))
            except BaseException as e:  # noqa: BLE001 - reported by the main thread
                failures.append(e)
            acks[i] = mine

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(failures, [])
        n = 16 * per_thread
        all_acks = sorted(a for mine in acks.values() for a in mine)
        self.assertEqual([s for s, _ in all_acks], list(range(n)), "sequences must be dense and unique")
        for mine in acks.values():
            seqs = [s for s, _ in mine]
            self.assertEqual(seqs, sorted(seqs), "one caller's appends keep their order")
        stored = [(m.sequence, m.message_id) for m in c.sessions.iter_messages(sid)]
        self.assertEqual(stored, all_acks, "every acknowledged message is stored at its acknowledged sequence")
        app = c.sessions.appender
        assert app is not None
        self.assertGreaterEqual(app.appends_sent, n)
        self.assertEqual(app.streams_opened, 1, "all threads share one stream")

    def test_retried_append_returns_the_original_sequences(self) -> None:
        for batched in (True, False):
            with self.subTest(batched=batched), Client(node.grpc_addr, batched_appends=batched) as c:  # type: ignore[union-attr]
                sid = c.sessions.create("retry").session.session_id
                c.sessions.append(sid, [("system", "first")])
                turn = [new_message("user", "q"), new_message("assistant", "a")]
                first = c.sessions.append(sid, turn)
                c.sessions.append(sid, [("user", "later")])
                again = c.sessions.append(sid, turn)
                self.assertFalse(first.duplicate)
                self.assertTrue(again.duplicate)
                self.assertEqual([m.sequence for m in first.messages], [1, 2])
                self.assertEqual([m.sequence for m in again.messages], [1, 2])
                self.assertEqual(c.sessions.get(sid).message_count, 4, "the retry stored nothing")

    def test_append_larger_than_a_batch_goes_unary(self) -> None:
        # Over the batch bound (1 MiB) an append travels as a unary Append,
        # with both transports; the node's own limits still apply.
        for transport in ("loop", "threads"):
            with self.subTest(transport=transport), Client(node.grpc_addr, append_transport=transport) as c:  # type: ignore[union-attr]
                sid = c.sessions.create("big").session.session_id
                big = [("user", "x" * (600 << 10)), ("assistant", "y" * (600 << 10))]
                r = c.sessions.append(sid, big)
                self.assertEqual([m.sequence for m in r.messages], [0, 1])
                app = c.sessions.appender
                assert app is not None
                self.assertEqual(app.appends_sent, 0, "a too-large append went into a batch")
                self.assertEqual([len(m.content) for m in c.sessions.iter_messages(sid)], [600 << 10] * 2)
                with self.assertRaises(errors.InvalidArgument):
                    c.sessions.append(sid, [("user", "z" * (1100 << 10))])

    def test_export_import(self) -> None:
        c = self.client
        sid = c.sessions.create("exporter").session.session_id
        c.sessions.append(sid, [("user", "one"), ("assistant", "two")])
        exp = c.sessions.export(sid)
        self.assertTrue(exp.checksum.startswith("sha256:"))
        imp = c.sessions.import_session(exp.data)
        self.assertEqual(imp.messages_imported, 2)
        self.assertNotEqual(imp.session.session_id, sid)
        self.assertEqual([m.content for m in c.sessions.iter_messages(imp.session.session_id)], ["one", "two"])

    def test_export_and_import_streams(self) -> None:
        c = self.client
        sid = c.sessions.create("streamer").session.session_id
        c.sessions.append(sid, [("user", f"m{i}") for i in range(5)])
        chunks = list(c.sessions.export_stream(sid))
        self.assertEqual(chunks[0].WhichOneof("part"), "header")
        self.assertEqual(chunks[-1].WhichOneof("part"), "trailer")
        self.assertEqual(chunks[-1].trailer.checksum, c.sessions.export(sid).checksum)
        imp = c.sessions.import_stream(chunks)
        self.assertEqual(imp.messages_imported, 5)
        self.assertEqual(imp.checksum, chunks[-1].trailer.checksum)
        self.assertEqual([m.content for m in c.sessions.iter_messages(imp.session.session_id)], [f"m{i}" for i in range(5)])
        with self.assertRaises(errors.NotFound):
            list(c.sessions.export_stream(new_ulid()))

    def test_errors_have_their_classes(self) -> None:
        c = self.client
        with self.assertRaises(errors.InvalidArgument) as cm:
            c.sessions.get("not-a-ulid")
        self.assertEqual(cm.exception.grpc_code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertTrue(cm.exception.code_from_details, "the node sends its code in the status details")
        with self.assertRaises(errors.NotFound):
            c.sessions.get(new_ulid())
        # Through the batched stream the error comes back as the append's outcome.
        with self.assertRaises(errors.NotFound) as nf:
            c.sessions.append(new_ulid(), [("user", "nobody home")])
        self.assertIsNone(nf.exception.grpc_code)
        sid = c.sessions.create("closer").session.session_id
        # A message id is a ULID or a client key of printable ASCII without
        # spaces (checked on a session that exists: the node looks it up first).
        with self.assertRaises(errors.InvalidArgument):
            c.sessions.append(sid, [new_message("user", "x", message_id="has a space")])
        c.sessions.close(sid)
        with self.assertRaises(errors.FailedPrecondition):
            c.sessions.append(sid, [("user", "too late")])
        with self.assertRaises(errors.InvalidArgument):
            c.sessions.append(sid, [("robot", "x")])

    def test_unreachable_node_is_unavailable_after_bounded_retries(self) -> None:
        # Port 1 on loopback: nothing listens there, so the connection is refused.
        with Client("127.0.0.1:1", retry=RetryPolicy(attempts=3, initial_backoff=0.01), timeout=10) as c:
            with self.assertRaises(errors.Unavailable):
                c.sessions.get(new_ulid())
            with self.assertRaises(errors.Unavailable):
                c.sessions.append(new_ulid(), [("user", "x")])


class RestartTest(unittest.TestCase):
    def test_appends_survive_a_node_restart_through_retries(self) -> None:
        for kill in (False, True):
            with self.subTest("crash" if kill else "drain"):
                self.restart(kill)

    def restart(self, kill: bool) -> None:
        first = Node()
        addr = first.grpc_addr
        policy = RetryPolicy(attempts=40, initial_backoff=0.05, max_backoff=0.5)
        second: Optional[Node] = None
        try:
            with Client(addr, retry=policy, timeout=30) as c:
                sid = c.sessions.create("restart").session.session_id
                c.sessions.append(sid, [("user", "before")])
                # The append stream stays open across the stop: a drain ends it
                # (the node answers what it took, then closes it), a crash cuts it.
                first.stop(keep=True, kill=kill)
                second = Node(grpc_addr=addr, dir=first.dir)
                # The next append finds the stream ended and is retried on a new one.
                r = c.sessions.append(sid, [("user", "after")])
                self.assertEqual(r.messages[0].sequence, 1)
                app = c.sessions.appender
                assert app is not None
                self.assertGreaterEqual(app.streams_opened, 2)
                self.assertEqual([m.content for m in c.sessions.iter_messages(sid)], ["before", "after"])
        finally:
            if second is not None:
                second.stop()
            else:
                first.stop()


class ReadmeTest(LiveTest):
    def test_the_readme_python_example_runs(self) -> None:
        text = (REPO / "README.md").read_text()
        start = text.index("```python\n", text.index("### Python")) + len("```python\n")
        code = text[start : text.index("```", start)]
        self.assertIn('Client("127.0.0.1:7420")', code)
        assert node is not None
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code.replace("127.0.0.1:7420", node.grpc_addr), "README.md", "exec"), {})
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[:2], ["[0, 1]", "['What changed?', 'Two files.']"])
        self.assertRegex(lines[2], r"^not found: session [0-9A-Z]{26} not found$")


class PlansTest(LiveTest):
    def test_record_errors_history_and_duplicates(self) -> None:
        p = self.client.plans
        plan = new_ulid()
        rec_id = new_ulid()
        first = p.record_error(plan, phase="execute", step_id="s1", error_type="timeout", message="tool timed out",
                               tool="shell", attributes={"attempt": 1}, record_id=rec_id)
        self.assertFalse(first.duplicate)
        self.assertEqual(first.record.record_id, rec_id)
        self.assertEqual(first.record.sequence, 0)
        self.assertEqual(first.record.phase, plan_pb2.PHASE_EXECUTE)
        dup = p.record_error(plan, phase="execute", step_id="s1", error_type="timeout", message="tool timed out",
                             tool="shell", attributes={"attempt": 1}, record_id=rec_id)
        self.assertTrue(dup.duplicate)
        self.assertEqual(dup.record.sequence, 0)
        self.assertEqual(dup.record.recorded_at, first.record.recorded_at, "the stored original is answered")
        # A reused record id is a retry only with the same content.
        with self.assertRaises(errors.AlreadyExists):
            p.record_error(plan, phase="execute", step_id="s1", error_type="timeout", message="other", record_id=rec_id)
        second = p.record_error(plan, phase="execute", step_id="s1", error_type="timeout", message="twice")
        self.assertEqual(second.record.sequence, 1)
        self.assertEqual(second.record.retry_count, 2)
        with self.assertRaises(errors.AlreadyExists):
            p.record_error(new_ulid(), phase="execute", step_id="s1", error_type="timeout", record_id=rec_id)

        hist = p.history(plan)
        self.assertEqual([r.sequence for r in hist.records], [0, 1])
        self.assertEqual(hist.next_sequence, -1)
        details = p.error_details(plan)
        self.assertEqual(details.details.retry_count, 2)
        self.assertEqual(details.details.error_phase, plan_pb2.PHASE_EXECUTE)
        with self.assertRaises(errors.InvalidArgument):
            p.record_error(plan, phase="execute", record_id="not-a-ulid")


class AuditTest(LiveTest):
    def test_record_list_and_verify(self) -> None:
        a = self.client.audit
        plan = new_ulid()
        rec = a.record("config_changed", plan_id=plan, actor_name="tester", details={"k": "v"}, sync=True)
        self.assertTrue(rec.durable)
        self.assertGreater(rec.entry.position, 0)
        self.assertEqual(len(rec.entry.hash), 64)
        listed = a.list(filter=audit_pb2.Filter(plan_id=plan))
        self.assertEqual([e.event_id for e in listed.entries], [rec.entry.event_id])
        self.assertEqual(a.count(filter=audit_pb2.Filter(plan_id=plan)), 1)
        self.assertEqual(a.get(rec.entry.event_id).hash, rec.entry.hash)
        v = a.verify()
        self.assertTrue(v.ok, v.reason)
        self.assertGreaterEqual(v.entries_checked, 1)


if __name__ == "__main__":
    unittest.main()
