// The tests' live node: one per test file, started from bin/node by the
// TypeScript client's test helper, with a client connected to it.
import { after, before } from "node:test";
import { createClient } from "@agentstate/client";
import { Node } from "../../typescript/test/node.mjs";

/** Starts a node before the file's tests and stops it after; the fields are set once they run. */
export function liveNode() {
  const live = { node: undefined, client: undefined };
  before(async () => {
    live.node = await Node.start();
    live.client = createClient(live.node.grpcAddr);
  });
  after(async () => {
    await live.client?.close();
    await live.node?.stop();
  });
  return live;
}

/** A user message item. */
export const user = (text) => ({ type: "message", role: "user", content: text });
