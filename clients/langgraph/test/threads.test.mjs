// A thread is one session: deleteThread removes all of it at once, and a
// saver that still holds the deleted session's id in its cache finds the
// thread gone, or made again, rather than reading or writing the old one.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "@agentstate/client";
import { emptyCheckpoint } from "@langchain/langgraph-checkpoint";
import { AgentStateSaver } from "../dist/index.js";
import { Node } from "../../typescript/test/node.mjs";

let node, client;
before(async () => {
  node = await Node.start();
  client = createClient(node.grpcAddr);
});
after(async () => {
  await client?.close();
  await node?.stop();
});

const meta = { source: "loop", step: 0, parents: {} };
const root = (thread, ns = "") => ({ configurable: { thread_id: thread, checkpoint_ns: ns } });

test("deleteThread removes every namespace; another saver's cache follows", async () => {
  const a = new AgentStateSaver(client);
  const b = new AgentStateSaver(client);
  const thread = "deleted-elsewhere";
  const first = await a.put(root(thread), emptyCheckpoint(), meta, {});
  await a.put(root(thread, "sub:1"), emptyCheckpoint(), meta, {});
  await a.putWrites(first, [["x", 1]], "task");
  assert.ok(await a.getTuple(root(thread))); // a now caches the session

  await b.deleteThread(thread);
  assert.equal(await a.getTuple(root(thread)), undefined);
  assert.equal(await a.getTuple(first), undefined);
  assert.equal(await a.getTuple(root(thread, "sub:1")), undefined);

  // Written again through b, read through a's stale cache.
  const again = emptyCheckpoint();
  await b.put(root(thread), again, meta, {});
  assert.equal((await a.getTuple(root(thread))).checkpoint.id, again.id);
  await b.deleteThread(thread);
  // a's cache is stale again; its put makes the thread anew.
  const third = emptyCheckpoint();
  await a.put(root(thread), third, meta, {});
  assert.equal((await b.getTuple(root(thread))).checkpoint.id, third.id);
});

test("deleting a thread that has no session is a no-op", async () => {
  await new AgentStateSaver(client).deleteThread("never-written");
});
