// Same-thread ownership across processes: two writers both load the
// thread's latest checkpoint C, then both put a child of C. Exactly one put
// succeeds, the other gets CheckpointConflict naming the stored child, and
// after 100 rounds the thread's checkpoints form one line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { createClient } from "@agentstate/client";
import { emptyCheckpoint } from "@langchain/langgraph-checkpoint";
import { AgentStateSaver } from "../dist/index.js";
import { Node } from "../../typescript/test/node.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const ROUNDS = 100;

/** A writer process; ask() sends a command and waits for its answer line. */
function writer(addr, thread, name) {
  const proc = spawn(process.execPath, [join(HERE, "proc", "owner.mjs"), addr, thread, name], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  const exited = new Promise((resolve) => proc.on("exit", resolve));
  return {
    async ask(cmd) {
      proc.stdin.write(cmd + "\n");
      const { value, done } = await lines.next();
      if (done) throw new Error(`writer ${name} exited with ${await exited}`);
      return value.split(" ");
    },
    async close() {
      proc.stdin.end("exit\n");
      assert.equal(await exited, 0);
    },
  };
}

test(`two processes putting a child of the same checkpoint: one wins, ${ROUNDS} rounds, no fork`, async () => {
  const node = await Node.start();
  try {
    const thread = "owned-thread";
    const client = createClient(node.grpcAddr);
    const saver = new AgentStateSaver(client);
    const root = emptyCheckpoint();
    await saver.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, root, { source: "input", step: -1, parents: {} }, {});
    const writers = [writer(node.grpcAddr, thread, "a"), writer(node.grpcAddr, thread, "b")];
    const line = [root.id];
    const refused = [];
    for (let round = 0; round < ROUNDS; round++) {
      const loaded = await Promise.all(writers.map((w) => w.ask("load")));
      for (const [, id] of loaded) assert.equal(id, line.at(-1), `round ${round}: both load the latest`);
      // Both puts are in flight together.
      const answers = await Promise.all(writers.map((w) => w.ask("put")));
      const stored = answers.filter(([what]) => what === "stored");
      const conflicts = answers.filter(([what]) => what === "conflict");
      assert.equal(stored.length, 1, `round ${round}: exactly one put succeeds: ${answers.join(" / ")}`);
      assert.equal(conflicts.length, 1);
      assert.equal(conflicts[0][1], stored[0][1], "the conflict names the stored child");
      line.push(stored[0][1]);
      refused.push(conflicts[0][2]);
    }
    await Promise.all(writers.map((w) => w.close()));

    // The stored chain: each checkpoint's parent is the one before it, and
    // only the winners' checkpoints (and their writes) exist.
    const listed = [];
    for await (const t of saver.list({ configurable: { thread_id: thread, checkpoint_ns: "" } })) listed.push(t);
    assert.deepEqual(listed.map((t) => t.checkpoint.id), [...line].reverse());
    for (const [i, t] of listed.reverse().entries()) {
      assert.equal(t.parentConfig?.configurable?.checkpoint_id, i === 0 ? undefined : line[i - 1]);
      if (i > 0) assert.equal(t.pendingWrites.length, 1);
    }
    // Nothing of a refused put was stored.
    for (const id of refused) {
      assert.equal(await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: "", checkpoint_id: id } }), undefined);
    }
    await client.close();
  } finally {
    await node.stop();
  }
});
