// @agentstate/client: the TypeScript client of an agentstate node.
export { AgentStateClient, createClient } from "./client.js";
export type { AppendOptions, ClientOptions, NewMessageInput, TlsOptions } from "./client.js";
export * from "./errors.js";
export { BatchAppender, MAX_BATCH_APPENDS, MAX_BATCH_BYTES } from "./batch.js";
export type { AppenderCounters } from "./batch.js";
export { DEFAULT_RETRY, NO_RETRY } from "./retry.js";
export type { RetryPolicy } from "./retry.js";
export { ChangesTail, SessionTail } from "./tail.js";
export type { TailChangesOptions, TailSessionOptions } from "./tail.js";
export { isUlid, newUlid } from "./ulid.js";
// The generated messages and services, one namespace per proto package (as
// Go's sessionv1, planv1, ...).
export * as commonv1 from "./gen/agentstate/common/v1/common_pb.js";
export * as sessionv1 from "./gen/agentstate/session/v1/session_pb.js";
export * as planv1 from "./gen/agentstate/plan/v1/plan_pb.js";
export * as auditv1 from "./gen/agentstate/audit/v1/audit_pb.js";
export * as feedv1 from "./gen/agentstate/feed/v1/feed_pb.js";
export { Role } from "./gen/agentstate/session/v1/session_pb.js";
