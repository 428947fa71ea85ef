"""Keyed items against a real node: item keys and kinds, keep-stored appends, get_item and list_items."""

from __future__ import annotations

import asyncio
import unittest
from typing import Optional

from agentstate import AsyncClient, Client, errors, new_message
from tests.node import Node

node: Optional[Node] = None


def setUpModule() -> None:
    global node
    node = Node()


def tearDownModule() -> None:
    if node is not None:
        node.stop()


class ItemsTest(unittest.TestCase):
    def test_keep_stored_get_item_and_pages(self) -> None:
        assert node is not None
        with Client(node.grpc_addr, timeout=20) as c:
            sid = c.sessions.create("items").session.session_id
            first = new_message("tool", "cp 1", item_key="cp:1", kind="checkpoint")
            c.sessions.append(sid, [first, ("user", "between")])
            turn = [
                new_message("tool", "again", item_key="cp:1", kind="checkpoint", keep_stored=True),
                new_message("tool", "cp 2", item_key="cp:2", kind="checkpoint", keep_stored=True),
            ]
            r = c.sessions.append(sid, turn)
            self.assertTrue(r.messages[0].kept)
            self.assertEqual((r.messages[0].message_id, r.messages[0].sequence), (first.message_id, 0))
            self.assertEqual((r.messages[1].kept, r.messages[1].sequence, r.next_sequence), (False, 2, 3))
            # A retry with the same ids is a duplicate, the kept message kept again.
            again = c.sessions.append(sid, turn)
            self.assertTrue(again.duplicate and again.messages[0].kept)
            with self.assertRaises(errors.AlreadyExists):
                c.sessions.append(sid, [new_message("tool", "x", item_key="cp:2")])

            m = c.sessions.get_item(sid, "cp:2")
            self.assertEqual((m.sequence, m.kind, m.item_key), (2, "checkpoint", "cp:2"))
            with self.assertRaises(errors.NotFound):
                c.sessions.get_item(sid, "cp:9")

            keys, cursor = [], None
            while True:
                page = c.sessions.list_items(sid, kind="checkpoint", newest_first=True, limit=1, cursor_sequence=cursor)
                keys += [m.item_key for m in page.messages]
                if not page.HasField("next_cursor_sequence"):
                    break
                cursor = page.next_cursor_sequence
            self.assertEqual(keys, ["cp:2", "cp:1"])
            self.assertEqual([m.content for m in c.sessions.list_items(sid, key_prefix="cp:1").messages], ["cp 1"])

    def test_async(self) -> None:
        assert node is not None

        async def run() -> None:
            async with AsyncClient(node.grpc_addr, timeout=20) as c:
                sid = (await c.sessions.create("items-aio")).session.session_id
                await c.sessions.append(sid, [new_message("tool", "w", item_key="w:1", kind="write")])
                self.assertEqual((await c.sessions.get_item(sid, "w:1")).kind, "write")
                page = await c.sessions.list_items(sid, kind="write")
                self.assertEqual([m.item_key for m in page.messages], ["w:1"])
                self.assertFalse(page.HasField("next_cursor_sequence"))

        asyncio.run(run())


if __name__ == "__main__":
    unittest.main()
