// Tails as async iterators: a session's messages and the change feed.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createClient, feedv1, newUlid } from "../dist/index.js";
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

test("a session tail delivers the stored messages, then new appends, then ended", async () => {
  const sid = (await c.createSession({ actorName: "tail" })).session.sessionId;
  await c.append(sid, [{ role: "user", content: "m0" }, { role: "assistant", content: "m1" }]);
  const tail = c.tailSession(sid, { fromSequence: 0n });
  const seen = [];
  let ended;
  for await (const ev of tail) {
    if (ev.event.case === "message") {
      seen.push([ev.event.value.sequence, ev.event.value.content]);
      // Each message seen makes the next: appended while the tail is live.
      if (seen.length === 2) await c.append(sid, [{ role: "user", content: "m2" }]);
      if (seen.length === 3) await c.append(sid, [{ role: "user", content: "m3" }]);
      if (seen.length === 4) await c.session.close({ sessionId: sid });
    } else if (ev.event.case === "ended") {
      ended = ev.event.value.reason;
    }
  }
  assert.deepEqual(seen, [[0n, "m0"], [1n, "m1"], [2n, "m2"], [3n, "m3"]]);
  assert.equal(ended, feedv1.SessionEnded_Reason.CLOSED);
  assert.equal(tail.ended, true);
  assert.equal(tail.nextSequence, 4n);
});

test("a tail from now skips what was there; leaving the loop ends it", async () => {
  const sid = (await c.createSession({ actorName: "from-now" })).session.sessionId;
  await c.append(sid, [{ role: "user", content: "old" }]);
  const tail = c.tailSession(sid, { fromNow: true });
  const it = tail[Symbol.asyncIterator]();
  const first = it.next();
  // Nothing tells when the tail's stream has opened, so an append may come
  // before it: append until the first event arrives (an event, not a sleep,
  // ends the loop), then check that it is one of the new ones.
  let got;
  first.then((r) => (got = r));
  let n = 0;
  while (got === undefined) {
    await c.append(sid, [{ role: "user", content: `new ${n++}` }]);
    await Promise.race([first, new Promise((r) => setImmediate(r))]);
  }
  assert.equal(got.value.event.case, "message");
  assert.ok(got.value.event.value.content.startsWith("new "), got.value.event.value.content);
  assert.ok(got.value.event.value.sequence >= 1n);
  await it.return();
  assert.equal(tail.nextSequence, got.value.event.value.sequence + 1n);
});

test("the change feed as an async iterator: stored entries, then live ones, resumable by position", async () => {
  const sid = (await c.createSession({ actorName: "changes" })).session.sessionId;
  const tail = c.tailChanges({ filter: { sessionId: sid } });
  const types = [];
  let appended = false;
  for await (const ev of tail) {
    assert.equal(ev.event.case, "entry");
    const entry = ev.event.value;
    assert.equal(entry.sessionId, sid);
    types.push(entry.eventType);
    if (!appended) {
      appended = true;
      // Recorded while the tail is live (a caller's event type).
      await c.audit.record({ eventType: "config_changed", sessionId: sid, actorName: "ts", detailsJson: '{"k":"v"}', eventId: newUlid(), sync: true });
    } else {
      break;
    }
  }
  assert.deepEqual(types, ["session_created", "config_changed"]);
  const last = tail.afterPosition;
  assert.ok(last > 0n);
  // Resuming after the last position seen delivers only what came later.
  await c.session.close({ sessionId: sid });
  for await (const ev of c.tailChanges({ filter: { sessionId: sid }, afterPosition: last })) {
    assert.ok(ev.event.value.position > last);
    assert.equal(ev.event.value.eventType, "session_closed");
    break;
  }
});

test("a tail whose node crashes resumes from its next sequence once the node is back: nothing twice, nothing skipped", async () => {
  let n = await Node.start();
  // Enough attempts for the node's restart; each waits at most 200 ms.
  const cl = createClient(n.grpcAddr, { retry: { attempts: 100, initialBackoffMs: 20, maxBackoffMs: 200, multiplier: 2 } });
  try {
    const sid = (await cl.createSession({ actorName: "crash" })).session.sessionId;
    await cl.append(sid, [{ role: "user", content: "m0" }, { role: "user", content: "m1" }]);
    const tail = cl.tailSession(sid);
    const seen = [];
    for await (const ev of tail) {
      assert.equal(ev.event.case, "message");
      seen.push(ev.event.value.sequence);
      if (seen.length === 2) {
        const { dir, grpcAddr } = n;
        await n.stop({ keep: true, kill: true });
        n = await Node.start({ dir, grpcAddr });
        await cl.append(sid, [{ role: "user", content: "m2" }]);
      }
      if (seen.length === 3) break;
    }
    assert.deepEqual(seen, [0n, 1n, 2n]);
    assert.equal(tail.nextSequence, 3n);
  } finally {
    await cl.close();
    await n.stop();
  }
});
