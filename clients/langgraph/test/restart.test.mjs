// Nothing acknowledged is lost to a crash: three chained checkpoints, each
// with pending writes, are stored; the node is killed (SIGKILL) and started
// again on the same database; a new process reads them all back, writes
// included.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { createClient } from "@agentstate/client";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import { AgentStateSaver } from "../dist/index.js";
import { Node } from "../../typescript/test/node.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));

test("three chained checkpoints with pending writes survive kill -9, read back by a new process", async () => {
  let node = await Node.start();
  try {
    const client = createClient(node.grpcAddr);
    const saver = new AgentStateSaver(client);
    const thread = "restart-thread";
    const want = [];
    let config = { configurable: { thread_id: thread, checkpoint_ns: "" } };
    for (let step = 0; step < 3; step++) {
      const parent = config.configurable.checkpoint_id;
      const checkpoint = {
        v: 4,
        id: uuid6(step),
        ts: new Date().toISOString(),
        channel_values: { messages: [`m${step}`], step },
        channel_versions: { messages: step + 1, step: step + 1 },
        versions_seen: { agent: { messages: step } },
      };
      const metadata = { source: "loop", step, parents: {} };
      config = await saver.put(config, checkpoint, metadata, { messages: step + 1, step: step + 1 });
      const writes = [["messages", [`w${step}`]], ["__error__", `e${step}`]];
      await saver.putWrites(config, writes, `task-${step}`, "path");
      // In LangGraph's order: by task path, task id, then index (the error
      // write's is -1).
      const pendingWrites = [[`task-${step}`, "__error__", `e${step}`], [`task-${step}`, "messages", [`w${step}`]]];
      want.push({ id: checkpoint.id, parent, checkpoint, metadata, pendingWrites });
    }
    await client.close();

    await node.stop({ keep: true, kill: true });
    node = await Node.start({ dir: node.dir });

    const { stdout } = await promisify(execFile)(process.execPath, [
      join(HERE, "proc", "read-thread.mjs"), node.grpcAddr, thread, ...want.map((w) => w.id),
    ]);
    const got = JSON.parse(stdout);
    const check = (t, w) => {
      assert.deepEqual(t.checkpoint, w.checkpoint);
      assert.deepEqual(t.metadata, w.metadata);
      assert.deepEqual(t.pendingWrites, w.pendingWrites);
      assert.equal(t.parentConfig?.configurable?.checkpoint_id, w.parent);
    };
    check(got.latest, want[2]);
    want.forEach((w, i) => check(got.byId[i], w));
    assert.deepEqual(got.listed.map((t) => t.checkpoint.id), want.map((w) => w.id).reverse());
    got.listed.forEach((t, i) => check(t, want[2 - i]));
  } finally {
    await node.stop();
  }
});
