// Keys built from the caller's names: namespaces that prefix one another
// stay apart, and names too long for a key (a deep subgraph's namespace, a
// long thread or task id) round-trip through their hashes.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "@agentstate/client";
import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { AgentStateSaver } from "../dist/index.js";
import { part } from "../dist/keys.js";
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

const meta = { source: "loop", step: 0, parents: {} };

async function idsOf(config) {
  const ids = [];
  for await (const t of saver.list(config)) ids.push(t.checkpoint.id);
  return ids;
}

test("a key part escapes its separators and hashes what is too long", () => {
  assert.equal(part("a:b%c#d"), "a%3Ab%25c%23d");
  assert.notEqual(part("a:b"), part("a%3Ab"));
  const long = "x".repeat(49);
  assert.match(part(long), /^#[A-Za-z0-9_-]{43}$/);
  assert.notEqual(part(long), part(long + "y"));
});

test("namespaces that prefix one another are listed apart", async () => {
  const thread = "prefixes";
  const ids = {};
  for (const ns of ["a", "a:b", "a%3Ab"]) {
    const cp = emptyCheckpoint();
    await saver.put({ configurable: { thread_id: thread, checkpoint_ns: ns } }, cp, meta, {});
    ids[ns] = cp.id;
  }
  for (const ns of Object.keys(ids)) {
    assert.deepEqual(await idsOf({ configurable: { thread_id: thread, checkpoint_ns: ns } }), [ids[ns]]);
    const t = await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: ns } });
    assert.equal(t.checkpoint.id, ids[ns]);
    assert.equal(t.config.configurable.checkpoint_ns, ns);
  }
  assert.equal((await idsOf({ configurable: { thread_id: thread } })).length, 3);
});

test("long thread ids, namespaces, channels and task ids round-trip", async () => {
  const thread = "t".repeat(300);
  const ns = `parent:${uuid6(-1)}|child:${uuid6(-1)}|grandchild:${uuid6(-1)}`;
  const channel = "branch:to:" + "n".repeat(60);
  const task = "task-" + "k".repeat(80);
  const cp = { ...emptyCheckpoint(), channel_values: { [channel]: "v" }, channel_versions: { [channel]: 1 } };
  const config = await saver.put({ configurable: { thread_id: thread, checkpoint_ns: ns } }, cp, meta, { [channel]: 1 });
  await saver.putWrites(config, [[channel, "w"]], task);
  for (const read of [config, { configurable: { thread_id: thread, checkpoint_ns: ns } }]) {
    const t = await saver.getTuple(read);
    assert.deepEqual(t.checkpoint, cp);
    assert.deepEqual(t.pendingWrites, [[task, channel, "w"]]);
    assert.deepEqual(t.config, { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: cp.id } });
  }
  const listed = [];
  for await (const t of saver.list({ configurable: {} })) if (t.config.configurable.thread_id === thread) listed.push(t);
  assert.equal(listed.length, 1);
  await saver.deleteThread(thread);
  assert.equal(await saver.getTuple(config), undefined);
});
