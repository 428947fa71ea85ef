// LangGraph's checkpointer validation suite, unchanged, through its library
// entries: validate() (718 cases) and deltaChannelHistoryTests() (8 cases,
// the opt-in part LangGraph's own savers run too), against the node at AGENTSTATE_ADDR (started by
// ../validation.test.mjs). Each checkpointer the suite creates gets its own
// agentstate namespace, and its destroy deletes that namespace's sessions,
// as the suite asks ("clean up any state that the checkpointer wrote").
import { deltaChannelHistoryTests, validate } from "@langchain/langgraph-checkpoint-validation";
import { createClient } from "@agentstate/client";
import { AgentStateSaver } from "../../dist/index.js";

const client = createClient(process.env.AGENTSTATE_ADDR);
let made = 0;

const initializer = {
  checkpointerName: "@agentstate/langgraph-checkpoint",
  createCheckpointer() {
    return new AgentStateSaver(client, { namespace: `validation-${process.pid}-${++made}` });
  },
  async destroyCheckpointer(saver) {
    const namespace = saver.namespace;
    let cursor = "";
    do {
      const res = await client.session.list({ namespace, limit: 1000, cursor });
      for (const s of res.sessions) await client.session.delete({ sessionId: s.sessionId });
      cursor = res.nextCursor;
    } while (cursor !== "");
  },
  afterAll: () => client.close(),
};

validate(initializer);
// validate() registers the client's close as its afterAll; Vitest runs it
// after these cases too (they are declared in the same file).
describe(initializer.checkpointerName, () => deltaChannelHistoryTests(initializer));
