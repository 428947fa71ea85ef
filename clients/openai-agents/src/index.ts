// @agentstate/openai-agents-session: the OpenAI Agents SDK's Session on an
// agentstate node.
export { AgentStateSession } from "./session.js";
export type { AgentStateSessionOptions } from "./session.js";
export { ITEM_KIND } from "./items.js";
