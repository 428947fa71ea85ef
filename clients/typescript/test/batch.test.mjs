// The batched append stream: many concurrent callers on one AppendBatches
// stream, each answered under its own tag.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { OutcomeUnknown, Unavailable, createClient, newUlid } from "../dist/index.js";
import { Node } from "./node.mjs";

const CALLERS = 64;
const APPENDS = 20;
let node;
before(async () => {
  node = await Node.start();
});
after(async () => {
  await node?.stop();
});

test(`${CALLERS} callers x ${APPENDS} appends, each to its own session, in order`, async () => {
  const c = createClient(node.grpcAddr);
  try {
    const sids = await Promise.all(Array.from({ length: CALLERS }, (_, i) => c.createSession({ actorName: `caller-${i}` })));
    await Promise.all(sids.map(async ({ session }, i) => {
      for (let k = 0; k < APPENDS; k++) {
        const id = newUlid();
        const r = await c.append(session.sessionId, [{ role: "user", content: `${i}/${k}`, messageId: id }]);
        // Its own answer: its message id, at the next sequence of its session.
        assert.equal(r.messages.length, 1);
        assert.equal(r.messages[0].messageId, id);
        assert.equal(r.messages[0].sequence, BigInt(k));
        assert.equal(r.duplicate, false);
      }
    }));
    for (const [i, { session }] of sids.entries()) {
      const { messages } = await c.session.listMessages({ sessionId: session.sessionId, limit: 1000 });
      assert.deepEqual(messages.map((m) => m.content), Array.from({ length: APPENDS }, (_, k) => `${i}/${k}`));
    }
    const n = c.appender.counters;
    assert.equal(n.streamsOpened, 1);
    assert.equal(n.appendsSent, CALLERS * APPENDS);
    // Callers that waited while a batch was being sent went together.
    assert.ok(n.batchesSent < n.appendsSent, JSON.stringify(n));
  } finally {
    await c.close();
  }
});

test(`${CALLERS} callers x ${APPENDS} appends to one session: sequences dense, each answer its own`, async () => {
  const c = createClient(node.grpcAddr);
  try {
    const sid = (await c.createSession({ actorName: "shared" })).session.sessionId;
    const answers = new Map(); // message id -> sequence
    await Promise.all(Array.from({ length: CALLERS }, async (_, i) => {
      for (let k = 0; k < APPENDS; k++) {
        const ids = [newUlid(), newUlid()];
        const r = await c.append(sid, [
          { role: "user", content: `${i}/${k}/a`, messageId: ids[0] },
          { role: "assistant", content: `${i}/${k}/b`, messageId: ids[1] },
        ]);
        assert.deepEqual(r.messages.map((m) => m.messageId), ids);
        // One turn's messages are consecutive.
        assert.equal(r.messages[1].sequence, r.messages[0].sequence + 1n);
        for (const m of r.messages) answers.set(m.messageId, m.sequence);
      }
    }));
    const total = CALLERS * APPENDS * 2;
    const seqs = [...answers.values()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    assert.deepEqual(seqs, Array.from({ length: total }, (_, i) => BigInt(i)));
    const stored = [];
    for (let from = 0n; ;) {
      const page = await c.session.listMessages({ sessionId: sid, fromSequence: from, limit: 1000 });
      if (page.messages.length === 0) break;
      stored.push(...page.messages);
      from = page.nextSequence;
    }
    assert.equal(stored.length, total);
    for (const m of stored) assert.equal(answers.get(m.messageId), m.sequence, m.content);
  } finally {
    await c.close();
  }
});

test("an append's deadline: one not answered in time fails, the stream goes on", async () => {
  const c = createClient(node.grpcAddr);
  try {
    const sid = (await c.createSession({ actorName: "deadline" })).session.sessionId;
    await c.append(sid, [{ role: "user", content: "first" }]);
    // timeoutMs 0 expires before the batch can be answered: either
    // withdrawn unsent (Unavailable) or sent without an answer (OutcomeUnknown).
    await assert.rejects(c.append(sid, [{ role: "user", content: "late" }], { timeoutMs: 0 }), (e) =>
      e instanceof Unavailable || e instanceof OutcomeUnknown);
    const r = await c.append(sid, [{ role: "user", content: "after" }]);
    assert.equal(r.duplicate, false);
    assert.equal(c.appender.counters.streamsOpened, 1);
  } finally {
    await c.close();
  }
});
