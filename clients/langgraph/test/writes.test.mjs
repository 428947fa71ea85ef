// Pending writes: a retried or partly stored batch stores only what is
// missing, in one append, and keeps what was stored; a special write
// (error, interrupt, ...) replaces the task's earlier one.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "@agentstate/client";
import { ERROR, emptyCheckpoint } from "@langchain/langgraph-checkpoint";
import { AgentStateSaver } from "../dist/index.js";
import { Node } from "../../typescript/test/node.mjs";

let node, client, saver;
before(async () => {
  node = await Node.start();
  client = createClient(node.grpcAddr);
  saver = new AgentStateSaver(client);
});
after(async () => {
  await client?.close();
  await node?.stop();
});

async function checkpoint(thread) {
  return saver.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, emptyCheckpoint(), { source: "loop", step: 0, parents: {} }, {});
}

test("a retried batch keeps the stored writes and adds the missing ones", async () => {
  const config = await checkpoint("retried-writes");
  await saver.putWrites(config, [["a", 1], ["b", 2]], "task");
  await saver.putWrites(config, [["a", 10], ["b", 20], ["c", 3]], "task");
  await saver.putWrites(config, [["a", 100]], "other");
  const t = await saver.getTuple(config);
  assert.deepEqual(t.pendingWrites, [["other", "a", 100], ["task", "a", 1], ["task", "b", 2], ["task", "c", 3]]);
  // One message per stored write: the kept ones were not stored again.
  const { session } = await client.session.get({ clientKey: "langgraph:retried-writes" });
  const items = await client.session.listItems({ sessionId: session.sessionId, kind: "write" });
  assert.equal(items.messages.length, 4);
});

test("a special write replaces the task's earlier one", async () => {
  const config = await checkpoint("special-writes");
  await saver.putWrites(config, [[ERROR, "first"]], "task");
  await saver.putWrites(config, [[ERROR, "second"]], "task");
  await saver.putWrites(config, [["x", 1]], "task");
  const t = await saver.getTuple(config);
  assert.deepEqual(t.pendingWrites, [["task", ERROR, "second"], ["task", "x", 1]]);
});

test("writes need a thread and a checkpoint id, and store nothing without them", async () => {
  await assert.rejects(saver.putWrites({ configurable: { checkpoint_id: "c" } }, [["a", 1]], "task"), /thread_id/);
  await assert.rejects(saver.putWrites({ configurable: { thread_id: "no-checkpoint" } }, [["a", 1]], "task"), /checkpoint_id/);
  assert.equal(await saver.getTuple({ configurable: { thread_id: "no-checkpoint" } }), undefined);
});
