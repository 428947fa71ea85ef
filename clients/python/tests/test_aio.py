"""The asyncio client against a real node."""

from __future__ import annotations

import asyncio
import json
import unittest
from typing import Awaitable, List, Optional, Tuple, TypeVar

from agentstate import AsyncClient, Client, errors, new_message, new_ulid
from agentstate.session.v1 import session_pb2
from tests.node import Node

node: Optional[Node] = None
T = TypeVar("T")


def setUpModule() -> None:
    global node
    node = Node()


def tearDownModule() -> None:
    if node is not None:
        node.stop()


class AsyncClientTest(unittest.TestCase):
    def run_async(self, coro: Awaitable[T]) -> T:
        return asyncio.run(asyncio.wait_for(coro, 60))

    def test_create_get_append_and_errors(self) -> None:
        async def run() -> None:
            assert node is not None
            async with AsyncClient(node.grpc_addr) as c:
                created = await c.sessions.create("async-planner")
                sid = created.session.session_id
                self.assertTrue(created.created)
                r = await c.sessions.append(sid, [("user", "hi"), ("assistant", "hello")])
                self.assertEqual([m.sequence for m in r.messages], [0, 1])
                self.assertEqual((await c.sessions.get(sid)).message_count, 2)
                page = await c.sessions.list_messages(sid)
                self.assertEqual([m.content for m in page.messages], ["hi", "hello"])
                with self.assertRaises(errors.NotFound):
                    await c.sessions.get(new_ulid())
                with self.assertRaises(errors.InvalidArgument):
                    await c.sessions.get("nope")
                with self.assertRaises(errors.NotFound):
                    await c.sessions.append(new_ulid(), [("user", "nobody")])
                rec = await c.plans.record_error(new_ulid(), phase="apply", error_type="conflict", message="m")
                self.assertEqual(rec.record.sequence, 0)
                self.assertTrue((await c.audit.verify()).ok)

        self.run_async(run())

    def test_append_larger_than_a_batch_goes_unary(self) -> None:
        async def run() -> None:
            assert node is not None
            async with AsyncClient(node.grpc_addr) as c:
                sid = (await c.sessions.create("async-big")).session.session_id
                r = await c.sessions.append(sid, [("user", "x" * (600 << 10)), ("assistant", "y" * (600 << 10))])
                self.assertEqual([m.sequence for m in r.messages], [0, 1])
                assert c.sessions.appender is not None
                self.assertEqual(c.sessions.appender.appends_sent, 0, "a too-large append went into a batch")
                with self.assertRaises(errors.InvalidArgument):
                    await c.sessions.append(sid, [("user", "z" * (1100 << 10))])
                # A ready request goes through the stream as it is.
                ready = await c.sessions.append_request(
                    session_pb2.AppendRequest(session_id=sid, messages=[new_message("user", "small")])
                )
                self.assertEqual(ready.messages[0].sequence, 2)
                self.assertEqual(c.sessions.appender.appends_sent, 1)

        self.run_async(run())

    def test_sixteen_tasks_share_one_stream_with_dense_sequences(self) -> None:
        async def run() -> Tuple[str, List[Tuple[int, str]], int]:
            assert node is not None
            async with AsyncClient(node.grpc_addr) as c:
                sid = (await c.sessions.create("async-swarm")).session.session_id
                acks: List[Tuple[int, str]] = []

                async def task(i: int) -> None:
                    last = -1
                    for k in range(40):
                        m = new_message("user", f"task {i} message {k}")
                        r = await c.sessions.append(sid, [m])
                        seq = r.messages[0].sequence
                        self.assertGreater(seq, last, "one task's appends keep their order")
                        last = seq
                        acks.append((seq, m.message_id))

                await asyncio.gather(*(task(i) for i in range(16)))
                app = c.sessions.appender
                assert app is not None
                self.assertEqual(app.streams_opened, 1)
                self.assertGreaterEqual(app.appends_sent, 640)
                return sid, acks, app.batches_sent

        sid, acks, batches = self.run_async(run())
        acks.sort()
        self.assertEqual([s for s, _ in acks], list(range(640)))
        assert node is not None
        with Client(node.grpc_addr) as c:
            stored = [(m.sequence, m.message_id) for m in c.sessions.iter_messages(sid)]
        self.assertEqual(stored, acks)

    def test_export_import_streams_and_the_rest(self) -> None:
        async def run() -> None:
            assert node is not None
            async with AsyncClient(node.grpc_addr) as c:
                sid = (await c.sessions.create("async-export")).session.session_id
                await c.sessions.append(sid, [("user", "a"), ("assistant", "b")])
                chunks = [ch async for ch in c.sessions.export_stream(sid)]
                self.assertEqual(chunks[-1].WhichOneof("part"), "trailer")
                imp = await c.sessions.import_stream(chunks)
                self.assertEqual(imp.messages_imported, 2)
                usage = await c.sessions.update_token_usage(sid, input_tokens=3, output_tokens=4, cost=0.5)
                self.assertEqual((usage.input_tokens, usage.output_tokens), (3, 4))
                plan = new_ulid()
                await c.plans.set_policy(plan, 5)
                await c.plans.record_error(plan, phase="execute", step_id="s", error_type="t")
                self.assertEqual((await c.plans.record_success(plan, phase="execute", step_id="s")).previous_retry_count, 1)
                merged = await c.plans.merge_error_details(plan, {"owner": "py"})
                self.assertEqual(json.loads(merged.details_json)["owner"], "py")
                self.assertEqual((await c.plans.error_details(plan)).max_retries, 5)
                # The same plan id in another namespace is another plan.
                other = await c.plans.record_error(plan, phase="execute", step_id="s", error_type="t", namespace="py-b")
                self.assertEqual((other.record.sequence, other.record.namespace), (0, "py-b"))
                self.assertEqual((await c.plans.error_details(plan, namespace="py-b")).max_retries, 3)
                await c.plans.set_policy(plan, 2, namespace="py-b")
                await c.plans.record_success(plan, phase="execute", step_id="s", namespace="py-b")
                await c.plans.merge_error_details(plan, {"owner": "b"}, namespace="py-b")
                self.assertEqual(len((await c.plans.history(plan, namespace="py-b")).records), 1)
                self.assertEqual(len((await c.plans.history(plan)).records), 1)
                await c.audit.flush()
                self.assertGreaterEqual(await c.audit.count(), 1)
                deleted = await c.sessions.delete(imp.session.session_id)
                self.assertEqual(deleted.messages_removed, 2)

        self.run_async(run())

    def test_retried_append_is_a_duplicate(self) -> None:
        async def run() -> None:
            assert node is not None
            async with AsyncClient(node.grpc_addr) as c:
                sid = (await c.sessions.create("async-retry")).session.session_id
                turn = [new_message("user", "q")]
                first = await c.sessions.append(sid, turn)
                again = await c.sessions.append(sid, turn)
                self.assertFalse(first.duplicate)
                self.assertTrue(again.duplicate)
                self.assertEqual(again.messages[0].sequence, first.messages[0].sequence)

        self.run_async(run())


if __name__ == "__main__":
    unittest.main()
