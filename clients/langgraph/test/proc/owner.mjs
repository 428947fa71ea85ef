// One of two writers of one thread (ownership.test.mjs). It reads commands
// from stdin, one per line, and answers each on stdout:
//   load            -> "loaded <id of the thread's latest checkpoint>"
//   put             -> "stored <new id>" or "conflict <stored child id> <refused id>": a
//                      child of the checkpoint it loaded, with a pending write
//   exit
import { createInterface } from "node:readline";
import { createClient } from "@agentstate/client";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import { AgentStateSaver, CheckpointConflict } from "../../dist/index.js";

const [addr, thread, name] = process.argv.slice(2);
const client = createClient(addr);
const saver = new AgentStateSaver(client);
let loaded;

for await (const line of createInterface({ input: process.stdin })) {
  if (line === "load") {
    loaded = await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: "" } });
    console.log(`loaded ${loaded.checkpoint.id}`);
  } else if (line === "put") {
    const step = loaded.metadata.step + 1;
    const checkpoint = {
      ...loaded.checkpoint,
      id: uuid6(-1),
      ts: new Date().toISOString(),
      channel_values: { ...loaded.checkpoint.channel_values, writer: name },
      channel_versions: { ...loaded.checkpoint.channel_versions, writer: step },
    };
    try {
      const config = await saver.put(loaded.config, checkpoint, { source: "loop", step, parents: {} }, { writer: step });
      await saver.putWrites(config, [["writer", name]], `task-${name}`);
      console.log(`stored ${checkpoint.id}`);
    } catch (e) {
      if (!(e instanceof CheckpointConflict)) throw e;
      console.log(`conflict ${e.storedChildId} ${e.refusedId}`);
    }
  } else if (line === "exit") {
    break;
  }
}
await client.close();
