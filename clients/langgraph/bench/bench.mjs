// Read latency of the checkpointer over gRPC on a long thread and a short
// one: getTuple (latest and by id) and list with limit 10. A benchmark, not
// a test: it starts its own node (bin/node, or $AGENTSTATE_NODE) on a
// temporary SQLite database, writes a thread of 10,000 checkpoints and one
// of 100 (each checkpoint with two changed channels and two pending
// writes), then times each read one call at a time and prints the figures.
//
//   node bench/bench.mjs [long-thread-checkpoints] [reads-per-op]
import { performance } from "node:perf_hooks";
import { createClient } from "@agentstate/client";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import { AgentStateSaver } from "../dist/index.js";
import { Node } from "../../typescript/test/node.mjs";

const LONG = Number(process.argv[2] ?? 10_000);
const READS = Number(process.argv[3] ?? 500);
const SHORT = 100;

async function writeThread(saver, thread, n) {
  const ids = [];
  let config = { configurable: { thread_id: thread, checkpoint_ns: "" } };
  for (let step = 0; step < n; step++) {
    const checkpoint = {
      v: 4,
      id: uuid6(-1),
      ts: new Date().toISOString(),
      channel_values: { messages: [`message ${step}`], counter: step, settings: { model: "m" } },
      channel_versions: { messages: step + 1, counter: step + 1, settings: 1 },
      versions_seen: { agent: { messages: step } },
    };
    const newVersions = step === 0 ? checkpoint.channel_versions : { messages: step + 1, counter: step + 1 };
    config = await saver.put(config, checkpoint, { source: "loop", step, parents: {} }, newVersions);
    await saver.putWrites(config, [["messages", [`reply ${step}`]], ["counter", step + 1]], `task-${step}`);
    ids.push(checkpoint.id);
  }
  return ids;
}

async function time(fn) {
  for (let i = 0; i < 50; i++) await fn(i); // warm-up: connection, caches, JIT
  const ms = [];
  for (let i = 0; i < READS; i++) {
    const t0 = performance.now();
    await fn(i);
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  return { p50: ms[Math.floor(ms.length / 2)], p95: ms[Math.floor(ms.length * 0.95)], mean: ms.reduce((a, b) => a + b, 0) / ms.length };
}

async function measure(saver, thread, ids) {
  const cfg = (checkpoint_id) => ({ configurable: { thread_id: thread, checkpoint_ns: "", checkpoint_id } });
  const pick = (i) => ids[(i * 7919) % ids.length];
  const latest = await time(async () => {
    if ((await saver.getTuple(cfg())) === undefined) throw new Error("no latest");
  });
  const byId = await time(async (i) => {
    if ((await saver.getTuple(cfg(pick(i)))) === undefined) throw new Error("no checkpoint");
  });
  const list = await time(async () => {
    let n = 0;
    for await (const _ of saver.list(cfg(), { limit: 10 })) n++;
    if (n !== 10) throw new Error(`list returned ${n}`);
  });
  return { "getTuple latest": latest, "getTuple by id": byId, "list limit 10": list };
}

const node = await Node.start();
try {
  const client = createClient(node.grpcAddr);
  const saver = new AgentStateSaver(client);
  const t0 = performance.now();
  const longIds = await writeThread(saver, "long", LONG);
  const shortIds = await writeThread(saver, "short", SHORT);
  const wrote = (performance.now() - t0) / 1000;
  console.log(`wrote ${LONG + SHORT} checkpoints with their writes in ${wrote.toFixed(1)} s`);
  const long = await measure(saver, "long", longIds);
  const short = await measure(saver, "short", shortIds);
  const f = (x) => x.toFixed(2);
  console.log(`\n| operation | ${LONG} checkpoints p50 / p95 (ms) | ${SHORT} checkpoints p50 / p95 (ms) | ratio of p50 |`);
  console.log("|---|---|---|---|");
  for (const op of Object.keys(long)) {
    console.log(`| ${op} | ${f(long[op].p50)} / ${f(long[op].p95)} | ${f(short[op].p50)} / ${f(short[op].p95)} | ${f(long[op].p50 / short[op].p50)} |`);
  }
  await client.close();
} finally {
  await node.stop();
}
