// One process of the concurrency tests: it connects, says "ready", waits
// for "go" on stdin (so that every worker starts together), does its job on
// the shared session and prints its result as one JSON line.
import { createInterface } from "node:readline";
import { once } from "node:events";
import { createClient } from "@agentstate/client";
import { AgentStateSession } from "../dist/index.js";

const job = JSON.parse(process.argv[2]);
const client = createClient(job.addr);
const session = new AgentStateSession(client, { sessionId: job.sessionId });
await session.getSessionId();
const lines = createInterface({ input: process.stdin });
process.stdout.write("ready\n");
await once(lines, "line");

const user = (text) => ({ type: "message", role: "user", content: text });
let result;
switch (job.mode) {
  case "pop": {
    // Pops until the session is empty: the items this process took.
    const taken = [];
    for (let item = await session.popItem(); item !== undefined; item = await session.popItem()) taken.push(item.content);
    result = taken;
    break;
  }
  case "append": {
    // Turns of one or two items, in order: "<tag>-<i>".
    for (let i = 0; i < job.count; ) {
      const turn = [user(`${job.tag}-${i++}`)];
      if (i % 3 === 0 && i < job.count) turn.push(user(`${job.tag}-${i++}`));
      await session.addItems(turn);
    }
    result = "done";
    break;
  }
  case "transaction":
    await session.applyHistoryTransaction(job.tx);
    result = "applied";
    break;
  default:
    throw new Error(`unknown mode ${job.mode}`);
}
process.stdout.write(JSON.stringify(result) + "\n");
lines.close();
await client.close();
