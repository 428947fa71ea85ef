// Several processes on one session: pops, appends and one history
// transaction, all started together, against a live node.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { OutcomeUnknown, createClient } from "@agentstate/client";
import { AgentStateSession } from "../dist/index.js";
import { liveNode, user } from "./live.mjs";

const live = liveNode();

/** Starts one worker per job, releases them together once all are ready, and returns their results. */
async function runWorkers(jobs) {
  const workers = jobs.map((job) => {
    const proc = spawn(process.execPath, [new URL("./worker.mjs", import.meta.url).pathname, JSON.stringify({ addr: live.node.grpcAddr, ...job })], {
      stdio: ["pipe", "pipe", "inherit"],
    });
    const out = createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
    return { proc, out, exited: once(proc, "exit") };
  });
  for (const w of workers) assert.equal((await w.out.next()).value, "ready");
  for (const w of workers) w.proc.stdin.write("go\n");
  const results = [];
  for (const w of workers) {
    const line = await w.out.next();
    w.proc.stdin.end();
    const [code] = await w.exited;
    assert.equal(code, 0, "a worker failed");
    results.push(JSON.parse(line.value));
  }
  return results;
}

test("two processes popping one session take each item exactly once", async () => {
  const sessionId = "concurrent-pops";
  const s = new AgentStateSession(live.client, { sessionId });
  const all = Array.from({ length: 150 }, (_, i) => `item-${i}`);
  await s.addItems(all.map(user));
  const [a, b] = await runWorkers([{ mode: "pop", sessionId }, { mode: "pop", sessionId }]);
  const taken = [...a, ...b];
  assert.equal(taken.length, all.length, `popped ${taken.length} items of ${all.length}`);
  assert.deepEqual([...taken].sort(), [...all].sort());
  // Each process took its items newest first.
  for (const mine of [a, b]) {
    const idx = mine.map((t) => Number(t.split("-")[1]));
    assert.deepEqual(idx, [...idx].sort((x, y) => y - x));
  }
  assert.deepEqual(await s.getItems(), []);
});

test("appends from several processes are all stored, each turn whole and in its process's order", async () => {
  const sessionId = "concurrent-appends";
  const count = 40;
  const tags = ["p0", "p1", "p2"];
  await runWorkers(tags.map((tag) => ({ mode: "append", sessionId, tag, count })));
  const got = (await new AgentStateSession(live.client, { sessionId }).getItems()).map((i) => i.content);
  assert.equal(got.length, tags.length * count);
  assert.equal(new Set(got).size, got.length, "an item was stored twice");
  for (const tag of tags) {
    const mine = got.filter((t) => t.startsWith(`${tag}-`)).map((t) => Number(t.split("-")[1]));
    assert.deepEqual(mine, Array.from({ length: count }, (_, i) => i), `${tag}'s items out of order or missing`);
  }
  // A two-item turn's items are adjacent: no other process's item between them.
  for (const [i, t] of got.entries()) {
    const [tag, n] = t.split("-");
    if (Number(n) % 3 === 2 && Number(n) + 1 < count) assert.equal(got[i + 1], `${tag}-${Number(n) + 1}`);
  }
});

test("one history transaction retried by two processes at once is stored once", async () => {
  const sessionId = "retried-transaction";
  const s = new AgentStateSession(live.client, { sessionId });
  await s.addItems([user("question"), user("draft answer")]);
  const tx = {
    operationId: "turn-7:accepted_replace",
    transaction: { type: "replace_suffix", expectedSuffix: [user("draft answer")], replacement: [user("answer"), user("follow-up")] },
  };
  const results = await runWorkers([
    { mode: "transaction", sessionId, tx },
    { mode: "transaction", sessionId, tx },
  ]);
  assert.deepEqual(results, ["applied", "applied"]);
  await s.applyHistoryTransaction(tx); // and once more, later
  assert.deepEqual((await s.getItems()).map((i) => i.content), ["question", "answer", "follow-up"]);
});

test("a history transaction whose answer was lost is stored once when retried", async () => {
  // The first answer of each write below is dropped after the node applied
  // it, as a broken connection would: the caller sees OutcomeUnknown.
  const lose = new Set();
  const lossy = createClient(live.node.grpcAddr, {
    interceptors: [
      (next) => async (req) => {
        const res = await next(req);
        if (lose.delete(req.method.name)) throw new OutcomeUnknown(`${req.method.name}: answer lost (test)`);
        return res;
      },
    ],
  });
  try {
    const s = new AgentStateSession(lossy, { sessionId: "lost-answers" });
    await s.addItems([user("a"), user("b")]);
    lose.add("ReplaceSuffix").add("Append");
    await s.applyHistoryTransaction({
      operationId: "op-replace",
      transaction: { type: "replace_suffix", expectedSuffix: [user("b")], replacement: [user("b2")] },
    });
    await s.applyHistoryTransaction({ operationId: "op-append", transaction: { type: "append_items", items: [user("c"), user("d")] } });
    assert.equal(lose.size, 0, "an answer was not dropped");
    assert.deepEqual((await s.getItems()).map((i) => i.content), ["a", "b2", "c", "d"]);
  } finally {
    await lossy.close();
  }
});
