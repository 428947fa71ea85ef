// Reads without call options go straight on the HTTP/2 connection (the
// lean path); with any option they go through Connect. Both must answer the
// same, fail with the same typed errors, and a caller's interceptors must
// still see every read.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ErrorCode, NotFound, createClient } from "../dist/index.js";
import { Node } from "./node.mjs";

let node;
let c;
let sid;
const N = 300;
before(async () => {
  node = await Node.start();
  c = createClient(node.grpcAddr);
  sid = (await c.createSession({ actorName: "reads" })).session.sessionId;
  // 300 items of 1 KB: a ListItems answer spans many HTTP/2 DATA frames.
  for (let i = 0; i < N; i += 50) {
    const batch = [];
    for (let j = i; j < i + 50; j++) {
      batch.push({ role: "user", content: `${j}:`.padEnd(1024, "x"), itemKey: `k:${String(j).padStart(4, "0")}`, kind: "item" });
    }
    await c.append(sid, batch);
  }
});
after(async () => {
  await c?.close();
  await node?.stop();
});

// A call option (here a timeout) sends the read through Connect.
const viaConnect = { timeoutMs: 30_000 };

test("a large ListItems answer is the same on the lean path and through Connect", async () => {
  const req = { sessionId: sid, kind: "item", limit: N };
  const lean = await c.session.listItems(req);
  const connect = await c.session.listItems(req, viaConnect);
  assert.equal(lean.messages.length, N);
  assert.deepEqual(lean.messages.map((m) => [m.sequence, m.itemKey, m.content]), connect.messages.map((m) => [m.sequence, m.itemKey, m.content]));
  assert.equal(lean.messages[N - 1].content, `${N - 1}:`.padEnd(1024, "x"));
  const page = await c.session.listItems({ sessionId: sid, keyPrefix: "k:01", newestFirst: true, limit: 10 });
  assert.deepEqual(page.messages.map((m) => m.itemKey), Array.from({ length: 10 }, (_, i) => `k:0${199 - i}`));
  assert.equal(page.nextCursorSequence, page.messages[9].sequence);
});

test("GetItem: the same message, and the same typed NotFound, on both paths", async () => {
  const lean = await c.session.getItem({ sessionId: sid, itemKey: "k:0042" });
  const connect = await c.session.getItem({ sessionId: sid, itemKey: "k:0042" }, viaConnect);
  assert.equal(lean.message.content, connect.message.content);
  assert.equal(lean.message.sequence, 42n);
  for (const opts of [undefined, viaConnect]) {
    const e = await c.session.getItem({ sessionId: sid, itemKey: "k:none" }, opts).catch((x) => x);
    assert.ok(e instanceof NotFound, String(e));
    assert.equal(e.errorCode, ErrorCode.NOT_FOUND);
    assert.equal(e.codeFromDetails, true);
  }
});

test("a lean read hands its headers and trailers to onHeader and onTrailer", async () => {
  let header;
  let trailer;
  await c.session.get({ sessionId: sid }, { onHeader: (h) => (header = h), onTrailer: (t) => (trailer = t) });
  assert.match(header.get("content-type") ?? "", /^application\/grpc/);
  assert.equal(trailer.get("grpc-status"), "0");
});

test("a client with interceptors of its own has them see every read", async () => {
  const seen = [];
  const cl = createClient(node.grpcAddr, { interceptors: [(next) => (req) => (seen.push(req.method.name), next(req))] });
  try {
    assert.equal((await cl.session.getItem({ sessionId: sid, itemKey: "k:0001" })).message.sequence, 1n);
    await cl.session.listItems({ sessionId: sid, limit: 1 });
    assert.deepEqual(seen, ["GetItem", "ListItems"]);
  } finally {
    await cl.close();
  }
});
