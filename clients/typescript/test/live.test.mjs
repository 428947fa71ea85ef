// Create, append, read, and retries that reuse ids, against a live node.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { OutcomeUnknown, Role, createClient, isUlid, newUlid } from "../dist/index.js";
import { Node } from "./node.mjs";

let node;
let c;
before(async () => {
  node = await Node.start();
  c = createClient(node.grpcAddr);
});
after(async () => {
  await c?.close();
  await node?.stop();
});

test("ULIDs are what the node accepts", () => {
  const seen = new Set();
  for (let i = 0; i < 1000; i++) {
    const id = newUlid();
    assert.ok(isUlid(id), id);
    seen.add(id);
  }
  assert.equal(seen.size, 1000);
  assert.ok(!isUlid(newUlid().toLowerCase()));
});

test("create, append and read a session", async () => {
  const created = await c.createSession({ actorName: "ts-client", metadataJson: '{"k":1}' });
  assert.equal(created.created, true);
  const sid = created.session.sessionId;
  assert.ok(isUlid(sid));
  const r = await c.append(sid, [
    { role: "user", content: "hi" },
    { role: Role.ASSISTANT, content: "hello", metadataJson: '{"model":"x"}' },
  ]);
  assert.equal(r.duplicate, false);
  assert.deepEqual(r.messages.map((m) => m.sequence), [0n, 1n]);
  assert.equal(r.nextSequence, 2n);
  const { messages } = await c.session.listMessages({ sessionId: sid });
  assert.deepEqual(messages.map((m) => [m.sequence, m.role, m.content]), [
    [0n, Role.USER, "hi"],
    [1n, Role.ASSISTANT, "hello"],
  ]);
  assert.deepEqual(messages.map((m) => m.messageId), r.messages.map((m) => m.messageId));
  assert.equal(JSON.parse(messages[1].metadataJson).model, "x");
  const { session } = await c.session.get({ sessionId: sid });
  assert.equal(session.messageCount, 2n);
  assert.equal(session.actorName, "ts-client");
});

test("a create repeated with its id is the same session", async () => {
  const sessionId = newUlid();
  const a = await c.createSession({ sessionId, actorName: "again" });
  const b = await c.createSession({ sessionId, actorName: "again" });
  assert.equal(a.created, true);
  assert.equal(b.created, false);
  assert.equal(b.session.sessionId, sessionId);
});

test("an append repeated with the same ids is a duplicate, stored once", async () => {
  for (const batchedAppends of [true, false]) {
    const cl = createClient(node.grpcAddr, { batchedAppends });
    try {
      const sid = (await cl.createSession({ actorName: "dup" })).session.sessionId;
      const ids = [newUlid(), newUlid()];
      const turn = [{ role: "user", content: "a", messageId: ids[0] }, { role: "assistant", content: "b", messageId: ids[1] }];
      const first = await cl.append(sid, turn);
      const again = await cl.append(sid, turn);
      assert.equal(first.duplicate, false, `batched=${batchedAppends}`);
      assert.equal(again.duplicate, true, `batched=${batchedAppends}`);
      assert.deepEqual(again.messages.map((m) => [m.messageId, m.sequence]), first.messages.map((m) => [m.messageId, m.sequence]));
      const { messages } = await cl.session.listMessages({ sessionId: sid });
      assert.deepEqual(messages.map((m) => m.messageId), ids);
    } finally {
      await cl.close();
    }
  }
});

test("the client's retry after a lost answer reuses the ids and gets the stored original", async () => {
  const sid = (await c.createSession({ actorName: "retry" })).session.sessionId;
  const cl = createClient(node.grpcAddr, { retry: { attempts: 3, initialBackoffMs: 1, maxBackoffMs: 2, multiplier: 2 } });
  // The first attempt reaches the node and is stored, but its answer is
  // "lost": the appender reports OutcomeUnknown, as for a broken stream.
  const real = cl.appender.append.bind(cl.appender);
  const attempts = [];
  cl.appender.append = async (req, timeoutMs) => {
    attempts.push(req.messages.map((m) => m.messageId));
    const r = await real(req, timeoutMs);
    if (attempts.length === 1) throw new OutcomeUnknown("answer lost (test)");
    return r;
  };
  try {
    const r = await cl.append(sid, [{ role: "user", content: "once" }]);
    assert.equal(attempts.length, 2);
    assert.deepEqual(attempts[1], attempts[0]);
    assert.equal(r.duplicate, true);
    const { messages } = await c.session.listMessages({ sessionId: sid });
    assert.equal(messages.length, 1);
    assert.equal(messages[0].messageId, attempts[0][0]);
  } finally {
    await cl.close();
  }
});

test("a conditional append is not retried after OutcomeUnknown", async () => {
  const sid = (await c.createSession({ actorName: "cond" })).session.sessionId;
  const cl = createClient(node.grpcAddr, { retry: { attempts: 3, initialBackoffMs: 1, maxBackoffMs: 2, multiplier: 2 } });
  let n = 0;
  cl.appender.append = async () => {
    n++;
    throw new OutcomeUnknown("answer lost (test)");
  };
  try {
    await assert.rejects(cl.append(sid, [{ role: "user", content: "x" }], { expectedNextSequence: 0n }), OutcomeUnknown);
    assert.equal(n, 1);
  } finally {
    await cl.close();
  }
});
