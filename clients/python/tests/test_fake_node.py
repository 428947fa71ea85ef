"""Retry and stream-failure behaviour against an in-process fake node whose failures are scripted.

A real node does not fail on cue; these fakes do, so the tests can check that
a retried append carries the very same message ids, that a failed batched
stream turns its sent appends into OutcomeUnknown (and the client retries
them on a new stream), and what is not retried.
"""

from __future__ import annotations

import asyncio
import threading
import unittest
from concurrent import futures
from typing import List

import grpc

from agentstate import AsyncClient, Client, NO_RETRY, RetryPolicy, errors, ids
from agentstate.audit.v1 import audit_pb2_grpc
from agentstate.session.v1 import session_pb2, session_pb2_grpc
from tests.fakes import FakeAudit, FakeSessions

FAST = RetryPolicy(attempts=4, initial_backoff=0.001, max_backoff=0.005)


class FakeNodeTest(unittest.TestCase):
    # The sync Client's batched-stream transport these tests run with.
    transport = "loop"

    def setUp(self) -> None:
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        self.sessions = FakeSessions()
        self.audit = FakeAudit()
        session_pb2_grpc.add_SessionServiceServicer_to_server(self.sessions, self.server)
        audit_pb2_grpc.add_AuditServiceServicer_to_server(self.audit, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.addr = f"127.0.0.1:{port}"

    def tearDown(self) -> None:
        self.audit.release.set()
        if self.sessions.hold_headers is not None:
            self.sessions.hold_headers.set()
        self.server.stop(None)

    def test_unary_append_retries_unavailable_with_the_same_ids(self) -> None:
        self.sessions.unary_failures = 2
        with Client(self.addr, append_transport=self.transport, retry=FAST, batched_appends=False) as c:
            r = c.sessions.append("S", [("user", "a"), ("assistant", "b")])
        self.assertEqual(len(self.sessions.unary_ids), 3)
        first = self.sessions.unary_ids[0]
        self.assertEqual(len(first), 2)
        self.assertTrue(all(ids == first for ids in self.sessions.unary_ids), self.sessions.unary_ids)
        self.assertEqual([m.message_id for m in r.messages], first)

    def test_unary_retries_are_bounded(self) -> None:
        self.sessions.unary_failures = 100
        with Client(self.addr, append_transport=self.transport, retry=FAST, batched_appends=False) as c:
            with self.assertRaises(errors.Unavailable):
                c.sessions.append("S", [("user", "a")])
        self.assertEqual(len(self.sessions.unary_ids), FAST.attempts)

    def test_failed_stream_makes_sent_appends_outcome_unknown_and_they_are_retried(self) -> None:
        self.sessions.stream_failures = 1
        with Client(self.addr, append_transport=self.transport, retry=FAST, token="t0k") as c:
            r = c.sessions.append("S", [("user", "a")])
            assert c.sessions.appender is not None
            self.assertEqual(c.sessions.appender.streams_opened, 2)
        ids = self.sessions.stream_ids
        self.assertEqual(len(ids), 2, ids)
        self.assertEqual(ids[0], ids[1], "the retry on the new stream must carry the same message id")
        self.assertEqual(r.messages[0].message_id, ids[0][0])
        # The stream outlives calls, so it carries the client's token itself.
        self.assertEqual(self.sessions.metadata[0].get("authorization"), "Bearer t0k")

    def test_failed_stream_without_retries_reports_outcome_unknown(self) -> None:
        self.sessions.stream_failures = 1
        with Client(self.addr, append_transport=self.transport, retry=NO_RETRY) as c:
            with self.assertRaises(errors.OutcomeUnknown) as cm:
                c.sessions.append("S", [("user", "a")])
        self.assertEqual(cm.exception.grpc_code, grpc.StatusCode.UNAVAILABLE)

    def test_refused_stream_is_not_retried(self) -> None:
        self.sessions.stream_refusal = grpc.StatusCode.UNAUTHENTICATED
        with Client(self.addr, append_transport=self.transport, retry=FAST) as c:
            with self.assertRaises(errors.Unauthenticated):
                c.sessions.append("S", [("user", "a")])
        self.assertEqual(self.sessions.streams, 1)

    def test_deadline_on_a_sent_append_is_outcome_unknown(self) -> None:
        self.sessions.silent = True
        with Client(self.addr, append_transport=self.transport, retry=FAST) as c:
            with self.assertRaises(errors.OutcomeUnknown):
                c.sessions.append("S", [("user", "a")], timeout=0.3)
        self.assertGreaterEqual(len(self.sessions.stream_ids), 1)

    def test_async_deadlines_expire_sent_appends_in_any_order(self) -> None:
        self.sessions.silent = True

        async def run() -> None:
            async with AsyncClient(self.addr, retry=FAST) as c:
                loop = asyncio.get_running_loop()
                start = loop.time()
                done_at = {}

                async def append(name: str, timeout: float) -> None:
                    with self.assertRaises(errors.OutcomeUnknown):
                        await c.sessions.append("S", [("user", name)], timeout=timeout)
                    done_at[name] = loop.time() - start

                # The second deadline is earlier than the first: both must still fire.
                await asyncio.gather(append("long", 0.6), append("short", 0.2))
                self.assertLess(done_at["short"], done_at["long"])
                self.assertLess(done_at["long"], 3.0)

        asyncio.run(run())

    def test_node_outcome_unknown_and_client_deadline_are_told_apart(self) -> None:
        with Client(self.addr, append_transport=self.transport, retry=FAST) as c:
            with self.assertRaises(errors.OutcomeUnknown) as node:
                c.audit.verify()
            with self.assertRaises(errors.OutcomeUnknown) as own:
                c.audit.count(timeout=0.2)
        self.assertTrue(node.exception.code_from_details)
        self.assertEqual(node.exception.message, "commit answer lost")
        self.assertFalse(own.exception.code_from_details)
        self.assertEqual(own.exception.grpc_code, grpc.StatusCode.DEADLINE_EXCEEDED)

    def test_audit_record_is_retried_with_its_event_id(self) -> None:
        with Client(self.addr, append_transport=self.transport, retry=FAST) as c:
            with self.assertRaises(errors.OutcomeUnknown) as cm:
                c.audit.record("deploy")
        self.assertEqual(self.audit.records, FAST.attempts, "an OUTCOME_UNKNOWN record is retried")
        self.assertTrue(ids.is_ulid(self.audit.event_ids[0]), self.audit.event_ids)
        self.assertEqual(set(self.audit.event_ids), {self.audit.event_ids[0]}, "every retry carries the same event id")
        self.assertEqual(cm.exception.grpc_code, grpc.StatusCode.DEADLINE_EXCEEDED)

    def test_a_broken_connection_on_a_write_is_outcome_unknown(self) -> None:
        # Without the node's detail, UNAVAILABLE is grpcio's: the request may
        # have been applied. A write without a client id is then not retried.
        with Client(self.addr, append_transport=self.transport, retry=FAST, batched_appends=False) as c:
            with self.assertRaises(errors.OutcomeUnknown):
                c.sessions.update_token_usage("S", input_tokens=5)
            self.assertEqual(self.sessions.usage_calls, 1, "a non-idempotent write was retried after a broken connection")
            # A read is still UNAVAILABLE: it applied nothing.
            with self.assertRaises(errors.Unavailable):
                c.sessions.get("S")
            # An append carries its ids, so it is retried, with them.
            self.sessions.unary_failures, self.sessions.transport_failures = 1, True
            c.sessions.append("S", [("user", "a")])
        self.assertEqual(len(self.sessions.unary_ids), 2)
        self.assertEqual(self.sessions.unary_ids[0], self.sessions.unary_ids[1])

    def test_writes_a_retry_could_repeat_are_not_retried_after_a_broken_connection(self) -> None:
        # A conditional append retried after it was stored would be refused
        # as a mismatch, hiding its success; an append without ids could be
        # stored twice. Both end OutcomeUnknown after one attempt.
        with Client(self.addr, append_transport=self.transport, retry=FAST, batched_appends=False) as c:
            self.sessions.unary_failures, self.sessions.transport_failures = 1, True
            with self.assertRaises(errors.OutcomeUnknown):
                c.sessions.append("S", [("user", "a")], expect=0)
            self.assertEqual(len(self.sessions.unary_ids), 1)
            self.sessions.unary_failures = 1
            req = session_pb2.AppendRequest(session_id="S", messages=[session_pb2.NewMessage(role=1, content="b")])
            with self.assertRaises(errors.OutcomeUnknown):
                c.sessions.append_request(req)
            self.assertEqual(len(self.sessions.unary_ids), 2)
            # The node's own UNAVAILABLE stored nothing: retried, condition and all.
            self.sessions.unary_failures, self.sessions.transport_failures = 1, False
            c.sessions.append("S", [("user", "c")], expect=0)
            self.assertEqual(len(self.sessions.unary_ids), 4)

    def test_async_failed_stream_is_retried_with_the_same_ids(self) -> None:
        self.sessions.stream_failures = 1

        async def run() -> session_pb2.AppendResponse:
            async with AsyncClient(self.addr, retry=FAST) as c:
                r = await c.sessions.append("S", [("user", "a")])
                assert c.sessions.appender is not None
                self.assertEqual(c.sessions.appender.streams_opened, 2)
                return r

        r = asyncio.run(run())
        ids = self.sessions.stream_ids
        self.assertEqual(len(ids), 2, ids)
        self.assertEqual(ids[0], ids[1])
        self.assertEqual(r.messages[0].message_id, ids[0][0])

    def test_deadline_on_an_append_not_sent_is_unavailable(self) -> None:
        # The stream is open but the node has not answered its headers: the
        # append is held back, so at its deadline it is withdrawn, unsent.
        self.sessions.hold_headers = threading.Event()
        with Client(self.addr, append_transport=self.transport, retry=NO_RETRY) as c:
            with self.assertRaises(errors.Unavailable) as cm:
                c.sessions.append("S", [("user", "a")], timeout=0.3)
            self.assertNotIsInstance(cm.exception, errors.OutcomeUnknown)
            self.sessions.hold_headers.set()
            # The stream goes on; the withdrawn append never travels on it.
            r = c.sessions.append("S", [("user", "b")])
        self.assertEqual(self.sessions.stream_ids, [[r.messages[0].message_id]])

    def test_close_ends_waiting_appends(self) -> None:
        # An append sent and never answered when the client closes: it may
        # have been stored, so OutcomeUnknown, and close does not hang.
        self.sessions.silent = True
        c = Client(self.addr, append_transport=self.transport, retry=NO_RETRY)
        got: List[BaseException] = []

        def append() -> None:
            try:
                c.sessions.append("S", [("user", "a")], timeout=20)
            except BaseException as e:  # noqa: BLE001 - checked below
                got.append(e)

        t = threading.Thread(target=append)
        t.start()
        for _ in range(200):  # until the fake node holds the append
            if self.sessions.stream_ids:
                break
            threading.Event().wait(0.01)
        self.assertTrue(self.sessions.stream_ids, "the append never reached the fake node")
        c.close()
        t.join(10)
        self.assertFalse(t.is_alive(), "close left an append waiting")
        self.assertEqual(len(got), 1)
        self.assertIsInstance(got[0], errors.OutcomeUnknown)
        with self.assertRaises(errors.Unavailable):
            c.sessions.append("S", [("user", "after close")])

    def test_threads_of_many_clients_append_concurrently(self) -> None:
        clients = [Client(self.addr, append_transport=self.transport, retry=FAST) for _ in range(3)]
        failures: List[BaseException] = []
        answered: List[str] = []

        def worker(c: Client, i: int) -> None:
            try:
                for k in range(20):
                    r = c.sessions.append("S", [("user", f"{i}/{k}")])
                    answered.append(r.messages[0].message_id)
            except BaseException as e:  # noqa: BLE001 - reported below
                failures.append(e)

        threads = [threading.Thread(target=worker, args=(clients[i % 3], i)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        io_threads = [t for t in threading.enumerate() if t.name == "agentstate-io"]
        for c in clients:
            c.close()
        self.assertEqual(failures, [])
        self.assertEqual(sorted(answered), sorted(i for batch in self.sessions.stream_ids for i in batch))
        self.assertEqual(len(answered), 240)
        for c in clients:
            assert c.sessions.appender is not None
            self.assertEqual(c.sessions.appender.streams_opened, 1)
        if self.transport == "loop":
            self.assertEqual(len(io_threads), 1, "every Client shares one background loop")
            io_threads[0].join(5)
            self.assertFalse(io_threads[0].is_alive(), "the loop outlived the last Client using it")
        else:
            self.assertEqual(io_threads, [])

    def test_answers_reach_callers_that_append_once(self) -> None:
        # A woken caller passes the next answer on when it appends again
        # (loop_batch._Stream.enqueue). Here no caller appends again: the
        # answers of one batch, arriving together, must still all be woken,
        # without a deadline to end the wait.
        with Client(self.addr, append_transport=self.transport, retry=NO_RETRY, timeout=None) as c:
            for round in range(5):
                start = threading.Barrier(8)
                done: List[int] = []

                def once(i: int) -> None:
                    start.wait()
                    c.sessions.append("S", [("user", f"once {i}")])
                    done.append(i)

                threads = [threading.Thread(target=once, args=(i,), daemon=True) for i in range(8)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(20)
                self.assertEqual(sorted(done), list(range(8)), f"round {round}: answers never woken")


class ThreadsTransportFakeNodeTest(FakeNodeTest):
    """The same, with grpcio's blocking stream (append_transport="threads")."""

    transport = "threads"


if __name__ == "__main__":
    unittest.main()
