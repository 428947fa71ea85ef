// Reads a thread back in a process of its own: argv address, thread id, and
// the checkpoint ids to read by id. Prints one JSON line: the latest tuple,
// each tuple by id, and list() of the thread.
import { createClient } from "@agentstate/client";
import { AgentStateSaver } from "../../dist/index.js";

const [addr, thread, ...ids] = process.argv.slice(2);
const client = createClient(addr);
const saver = new AgentStateSaver(client);
const config = (checkpoint_id) => ({ configurable: { thread_id: thread, checkpoint_ns: "", checkpoint_id } });
const latest = await saver.getTuple(config());
const byId = [];
for (const id of ids) byId.push(await saver.getTuple(config(id)));
const listed = [];
for await (const t of saver.list({ configurable: { thread_id: thread } })) listed.push(t);
await client.close();
process.stdout.write(JSON.stringify({ latest, byId, listed }) + "\n");
