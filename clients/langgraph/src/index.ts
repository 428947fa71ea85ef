// @agentstate/langgraph-checkpoint: LangGraph.js checkpoints on an agentstate node.
export { AgentStateSaver } from "./saver.js";
export type { AgentStateSaverOptions } from "./saver.js";
export { CheckpointConflict } from "./errors.js";
export type { ThreadOptions } from "./threads.js";
