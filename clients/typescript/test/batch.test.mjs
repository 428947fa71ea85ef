// The batched append stream: many concurrent callers on one AppendBatches
// stream, each answered under its own tag.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { constants as http2constants, createServer } from "node:http2";
import { NO_RETRY, OutcomeUnknown, Unauthenticated, Unavailable, createClient, newUlid } from "../dist/index.js";
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

// A stand-in node over HTTP/2 that does only what a test says with the
// AppendBatches stream, to tell the append's fates apart deterministically.
async function fakeNode(onStream) {
  const server = createSecureOrPlain();
  server.on("stream", (stream) => {
    let got = 0;
    stream.on("data", (b) => (got += b.length));
    stream.on("error", () => {});
    onStream(stream, () => got);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { addr: `127.0.0.1:${server.address().port}`, close: () => new Promise((r) => { server.close(r); for (const s of sessions) s.destroy(); }) };
}
const sessions = new Set();
function createSecureOrPlain() {
  const server = createServer();
  server.on("session", (s) => sessions.add(s));
  return server;
}

test("an append whose stream never opened is Unavailable at its deadline: it was never sent", async () => {
  let received;
  const fake = await fakeNode((stream, got) => (received = got)); // no headers, ever
  const c = createClient(fake.addr);
  try {
    await assert.rejects(c.append(newUlid(), [{ role: "user", content: "x" }], { timeoutMs: 200 }), Unavailable);
    assert.equal(received(), 0, "the append was sent before the stream opened");
  } finally {
    await c.close().catch(() => {});
    await fake.close();
  }
});

test("an append sent but not answered is OutcomeUnknown at its deadline", async () => {
  let received;
  const fake = await fakeNode((stream, got) => {
    received = got;
    stream.respond({ ":status": 200, "content-type": "application/grpc" });
  });
  const c = createClient(fake.addr);
  try {
    await assert.rejects(c.append(newUlid(), [{ role: "user", content: "x" }], { timeoutMs: 200 }), OutcomeUnknown);
    assert.ok(received() > 0, "the append was not sent");
  } finally {
    await c.close().catch(() => {});
    await fake.close();
  }
});

test("a stream that breaks after an append was sent fails it OutcomeUnknown; a refused stream passes on the refusal", async () => {
  const fake = await fakeNode((stream) => {
    stream.respond({ ":status": 200, "content-type": "application/grpc" });
    stream.once("data", () => stream.close(http2constants.NGHTTP2_INTERNAL_ERROR));
  });
  const c = createClient(fake.addr, { retry: NO_RETRY });
  try {
    await assert.rejects(c.append(newUlid(), [{ role: "user", content: "x" }]), OutcomeUnknown);
  } finally {
    await c.close().catch(() => {});
    await fake.close();
  }
  const refusing = await fakeNode((stream) => {
    stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "16", "grpc-message": "no token" }, { endStream: true });
  });
  const r = createClient(refusing.addr);
  try {
    await assert.rejects(r.append(newUlid(), [{ role: "user", content: "x" }]), Unauthenticated);
  } finally {
    await r.close().catch(() => {});
    await refusing.close();
  }
});
