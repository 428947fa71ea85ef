"""Conditional appends, session state and shared scopes, and tails, against a real node."""

from __future__ import annotations

import asyncio
import json
import threading
import unittest
from typing import Any, Callable, List, Optional

from agentstate import AsyncClient, Client, RetryPolicy, errors, new_message, new_ulid, state_delta
from agentstate.feed.v1 import feed_pb2
from tests.node import Node

node: Optional[Node] = None

# Every kind of append path the client has: each must carry the condition.
TRANSPORTS = {
    "loop": dict(append_transport="loop"),
    "threads": dict(append_transport="threads"),
    "unary": dict(batched_appends=False),
}


def setUpModule() -> None:
    global node
    node = Node()


def tearDownModule() -> None:
    if node is not None:
        node.stop()


def guard(tail: Any, seconds: float = 30.0) -> threading.Timer:
    """Cancels a tail that outlives a failed test, so the run ends instead of hanging."""
    t = threading.Timer(seconds, tail.cancel)
    t.daemon = True
    t.start()
    return t


class ConditionalAppendTest(unittest.TestCase):
    def test_expect_stores_only_at_the_expected_sequence_on_every_transport(self) -> None:
        assert node is not None
        for name, kw in TRANSPORTS.items():
            with self.subTest(name), Client(node.grpc_addr, timeout=20, **kw) as c:
                sid = c.sessions.create("cond").session.session_id
                r = c.sessions.append(sid, [("user", "a"), ("assistant", "b")], expect=0)
                self.assertEqual([m.sequence for m in r.messages], [0, 1])
                self.assertEqual(r.next_sequence, 2)
                with self.assertRaises(errors.SequenceMismatch) as cm:
                    c.sessions.append(sid, [("user", "late")], expect=1)
                e = cm.exception
                self.assertIsInstance(e, errors.FailedPrecondition)
                self.assertEqual((e.expected_next_sequence, e.next_sequence), (1, 2))
                self.assertEqual(c.sessions.get(sid).message_count, 2, "a refused conditional append stored something")
                r = c.sessions.append(sid, [("user", "c")], expect=e.next_sequence)
                self.assertEqual(r.messages[0].sequence, 2)
                with self.assertRaises(errors.InvalidArgument):
                    c.sessions.append(sid, [("user", "x")], expect=-1)

    def test_expect_async(self) -> None:
        assert node is not None

        async def run() -> None:
            async with AsyncClient(node.grpc_addr, timeout=20) as c:
                sid = (await c.sessions.create("cond")).session.session_id
                await c.sessions.append(sid, [("user", "a")], expect=0)
                with self.assertRaises(errors.SequenceMismatch) as cm:
                    await c.sessions.append(sid, [("user", "b")], expect=0)
                self.assertEqual(cm.exception.next_sequence, 1)
                r = await c.sessions.append(sid, [("user", "b")], expect=1)
                self.assertEqual(r.messages[0].sequence, 1)

        asyncio.run(run())


class StateTest(unittest.TestCase):
    def setUp(self) -> None:
        assert node is not None
        self.c = Client(node.grpc_addr, timeout=20)
        self.addCleanup(self.c.close)

    def test_update_and_get_state_and_scopes(self) -> None:
        s = self.c.sessions
        sid = s.create("stateful").session.session_id
        scope = f"app:{new_ulid()}"
        self.assertEqual(json.loads(s.get_state(sid).state_json), {})
        up = s.update_state(sid, set={"count": 3, "name": "x", "tags": ["a"]}, scopes={scope: {"theme": "dark"}})
        self.assertEqual(json.loads(up.state_json), {"count": 3, "name": "x", "tags": ["a"]})
        self.assertEqual(up.next_sequence, 0)
        up = s.update_state(sid, set={"count": 4}, delete=["name"], expect=0)
        self.assertEqual(json.loads(up.state_json), {"count": 4, "tags": ["a"]})

        # A turn changes state and scopes with its messages, in one transaction.
        r = s.append(sid, [("user", "hi")], state={"turns": 1},
                     scopes={scope: state_delta(set={"lang": "en"}, delete=["theme"])}, expect=0)
        self.assertEqual(r.next_sequence, 1)
        got = s.get_state(sid, scopes=[scope, "app:never-written"])
        self.assertEqual(got.next_sequence, 1)
        self.assertEqual(json.loads(got.state_json), {"count": 4, "tags": ["a"], "turns": 1})
        self.assertEqual([sc.scope for sc in got.scopes], [scope, "app:never-written"])
        self.assertEqual(json.loads(got.scopes[0].state_json), {"lang": "en"})
        self.assertEqual(json.loads(got.scopes[1].state_json), {})
        only = s.get_state(scopes=[scope])
        self.assertEqual(only.state_json, "", "no session was asked for")
        self.assertEqual(json.loads(only.scopes[0].state_json), {"lang": "en"})

        with self.assertRaises(errors.SequenceMismatch) as cm:
            s.update_state(sid, set={"count": 5}, expect=0)
        self.assertEqual(cm.exception.next_sequence, 1)
        self.assertEqual(json.loads(s.get_state(sid).state_json)["count"], 4, "a refused update changed the state")

    def test_bad_state_input_is_invalid_argument_and_stores_nothing(self) -> None:
        s = self.c.sessions
        sid = s.create("stateful").session.session_id
        for call in (
            lambda: s.get_state(),
            lambda: s.update_state(sid, set={"x": float("nan")}),
            lambda: s.update_state(sid, set={"x": object()}),
            lambda: s.update_state(sid, delete="x"),
            lambda: s.append(sid, [("user", "a")], state=["not", "a", "mapping"]),  # type: ignore[arg-type]
            lambda: s.update_state(sid, set={"k": 1}, expect=True),  # type: ignore[arg-type]
        ):
            with self.assertRaises(errors.InvalidArgument):
                call()
        with self.assertRaises(errors.NotFound):
            s.get_state(new_ulid())
        self.assertEqual(json.loads(s.get_state(sid).state_json), {})
        self.assertEqual(s.get(sid).message_count, 0)


def contents(events: List[feed_pb2.SessionEvent]) -> List[str]:
    return [e.message.content for e in events if e.WhichOneof("event") == "message"]


class TailTest(unittest.TestCase):
    def setUp(self) -> None:
        assert node is not None
        self.c = Client(node.grpc_addr, timeout=20)
        self.addCleanup(self.c.close)

    def test_catch_up_then_live_then_ended_when_closed(self) -> None:
        s = self.c.sessions
        sid = s.create("tailed").session.session_id
        s.append(sid, [("user", "a"), ("assistant", "b")])
        tail = s.tail(sid)
        guard(tail)
        events: List[feed_pb2.SessionEvent] = []
        for ev in tail:
            events.append(ev)
            if len(events) == 2:  # caught up: the next one is live
                s.append(sid, [("user", "c")])
            elif len(events) == 3:
                s.close(sid)
        self.assertEqual(contents(events), ["a", "b", "c"])
        self.assertEqual([e.message.sequence for e in events[:3]], [0, 1, 2])
        self.assertEqual(events[-1].ended.reason, feed_pb2.SessionEnded.REASON_CLOSED)
        self.assertTrue(tail.ended)
        self.assertEqual(tail.next_sequence, 3)

        # Resuming from a sequence delivers from there.
        again = s.tail(sid, from_sequence=1)
        guard(again)
        self.assertEqual(contents(list(again)), ["b", "c"])

    def test_from_now_and_cancel_from_another_thread(self) -> None:
        s = self.c.sessions
        sid = s.create("tailed").session.session_id
        s.append(sid, [("user", "old")])
        tail = s.tail(sid, from_now=True)
        guard(tail)
        got: List[feed_pb2.SessionEvent] = []
        first = threading.Event()
        failures: List[BaseException] = []

        def follow() -> None:
            try:
                for ev in tail:
                    got.append(ev)
                    first.set()
            except BaseException as e:  # noqa: BLE001 - reported by the main thread
                failures.append(e)
                first.set()

        t = threading.Thread(target=follow)
        t.start()
        # The stream is open once the tail's request went out; a message
        # appended after that is "new". Appending until one arrives avoids
        # guessing when the stream was established.
        while not first.is_set():
            s.append(sid, [("user", "new")])
            first.wait(0.2)
        tail.cancel()
        t.join(10)
        self.assertFalse(t.is_alive(), "cancel did not end the tail")
        self.assertEqual(failures, [])
        self.assertGreaterEqual(len(got), 1)
        self.assertEqual(set(contents(got)), {"new"}, "from_now delivered an old message")
        self.assertFalse(tail.ended)
        self.assertEqual(tail.next_sequence, got[-1].message.sequence + 1)

    def test_unknown_session_is_not_found(self) -> None:
        with self.assertRaises(errors.NotFound):
            next(iter(self.c.sessions.tail(new_ulid())))

    def test_async_tail(self) -> None:
        assert node is not None

        async def run() -> List[feed_pb2.SessionEvent]:
            async with AsyncClient(node.grpc_addr, timeout=20) as c:
                sid = (await c.sessions.create("tailed")).session.session_id
                await c.sessions.append(sid, [("user", "a")])
                tail = c.sessions.tail(sid)
                events: List[feed_pb2.SessionEvent] = []
                async for ev in tail:
                    events.append(ev)
                    if len(events) == 1:
                        await c.sessions.append(sid, [("user", "b")])
                    elif len(events) == 2:
                        await c.sessions.delete(sid)
                self.assertTrue(tail.ended)
                return events

        events = asyncio.run(asyncio.wait_for(run(), 30))
        self.assertEqual(contents(events), ["a", "b"])
        self.assertEqual(events[-1].ended.reason, feed_pb2.SessionEnded.REASON_DELETED)


class TailAcrossRestartTest(unittest.TestCase):
    def test_a_crash_is_resumed_and_a_drain_ends_with_where_to_resume(self) -> None:
        for kill in (True, False):
            with self.subTest("crash" if kill else "drain"):
                self.restart(kill)

    def restart(self, kill: bool) -> None:
        first = Node()
        second: Optional[Node] = None
        policy = RetryPolicy(attempts=40, initial_backoff=0.05, max_backoff=0.5)
        try:
            with Client(first.grpc_addr, retry=policy, timeout=30) as c:
                sid = c.sessions.create("restart").session.session_id
                c.sessions.append(sid, [new_message("user", "before")])
                tail = c.sessions.tail(sid)
                guard(tail, 60)
                events: List[feed_pb2.SessionEvent] = []

                def restart_and_append() -> None:
                    nonlocal second
                    first.stop(keep=True, kill=kill)
                    second = Node(grpc_addr=first.grpc_addr, dir=first.dir)
                    c.sessions.append(sid, [("user", "after")])

                step: Callable[[], None] = restart_and_append
                for ev in tail:
                    events.append(ev)
                    if ev.WhichOneof("event") == "message" and ev.message.content == "before":
                        step()
                    if ev.WhichOneof("event") == "message" and ev.message.content == "after":
                        tail.cancel()
                if kill:
                    # The broken stream was reopened from sequence 1: "after"
                    # once, "before" not again.
                    self.assertEqual(contents(events), ["before", "after"])
                    self.assertFalse(tail.ended)
                    return
                # A drain ends the tail with NODE_STOPPING after what was committed.
                self.assertEqual(contents(events), ["before"])
                self.assertEqual(events[-1].ended.reason, feed_pb2.SessionEnded.REASON_NODE_STOPPING)
                self.assertEqual(tail.next_sequence, 1)
                resumed = c.sessions.tail(sid, from_sequence=tail.next_sequence)
                guard(resumed)
                for ev in resumed:
                    self.assertEqual(ev.message.content, "after")
                    resumed.cancel()
                self.assertEqual(resumed.next_sequence, 2)
        finally:
            (second or first).stop()
