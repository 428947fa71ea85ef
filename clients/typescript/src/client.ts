// AgentStateClient: one HTTP/2 connection to a node (Connect's Node gRPC
// transport), the generated clients of its four services with typed errors
// and retries, and the calls that need more than one request: appends with
// client-made ids on the shared AppendBatches stream, and tails as async
// iterators.
import { create } from "@bufbuild/protobuf";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { createClient as connectClient } from "@connectrpc/connect";
import type { Client, Interceptor, Transport } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";
import type { TimestampSchema } from "@bufbuild/protobuf/wkt";
import type { SecureClientSessionOptions } from "node:http2";
import { AuditService } from "./gen/agentstate/audit/v1/audit_pb.js";
import { FeedService } from "./gen/agentstate/feed/v1/feed_pb.js";
import { PlanService } from "./gen/agentstate/plan/v1/plan_pb.js";
import type {
  AppendRequest,
  AppendResponse,
  CreateSessionResponse,
  ScopeDeltaSchema,
  Session,
  StateDeltaSchema,
} from "./gen/agentstate/session/v1/session_pb.js";
import { AppendRequestSchema, CreateSessionRequestSchema, Role, SessionService } from "./gen/agentstate/session/v1/session_pb.js";
import { BatchAppender } from "./batch.js";
import { Internal, InvalidArgument, forWrite, fromError } from "./errors.js";
import { DEFAULT_RETRY, errorsAndRetries, isRead, withRetries } from "./retry.js";
import { leanReads } from "./unary.js";
import type { RetryPolicy } from "./retry.js";
import { ChangesTail, SessionTail } from "./tail.js";
import type { TailChangesOptions, TailSessionOptions } from "./tail.js";
import { newUlid } from "./ulid.js";

/** TLS settings: the CA that signed the node's certificate (else the system roots), a client certificate, a name to verify. */
export interface TlsOptions {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** The name to verify the node's certificate against, when it differs from the address's host. */
  serverName?: string;
}

export interface ClientOptions {
  /** Sent as `authorization: Bearer <token>` on every call and stream (a node started with --auth-token-file). */
  token?: string;
  /** undefined/false: plaintext; true: TLS verified with the system roots; or the TLS settings. */
  tls?: boolean | TlsOptions;
  /** Retries of unary calls and appends (default: 5 attempts, 50 ms doubling to 2 s, jittered). */
  retry?: RetryPolicy;
  /** Default deadline of appends and creates in milliseconds, all attempts included (default: none). */
  timeoutMs?: number;
  /** false: every append is a unary Append instead of sharing the AppendBatches stream. */
  batchedAppends?: boolean;
  /** Interceptors to run before the client's own (outermost first). */
  interceptors?: Interceptor[];
}

type RoleName = "user" | "assistant" | "system" | "tool";
const ROLES: Record<RoleName, Role> = { user: Role.USER, assistant: Role.ASSISTANT, system: Role.SYSTEM, tool: Role.TOOL };

/** A message to append; messageId is filled with a new ULID when absent. */
export interface NewMessageInput {
  role: Role | RoleName;
  content?: string;
  /** A JSON object. */
  metadataJson?: string;
  messageId?: string;
  eventTime?: MessageInitShape<typeof TimestampSchema>;
}

export interface AppendOptions {
  /** Store the turn only if the session's next sequence is this (else SequenceMismatch, nothing stored). */
  expectedNextSequence?: bigint;
  stateDelta?: MessageInitShape<typeof StateDeltaSchema>;
  scopeDeltas?: MessageInitShape<typeof ScopeDeltaSchema>[];
  /** Deadline of the append, all attempts included. */
  timeoutMs?: number;
}

/** A connection to a node; close() it when done. */
export class AgentStateClient {
  readonly session: Client<typeof SessionService>;
  readonly plan: Client<typeof PlanService>;
  readonly audit: Client<typeof AuditService>;
  readonly feed: Client<typeof FeedService>;
  readonly appender: BatchAppender;
  private readonly sessions: Http2SessionManager;
  // One attempt of a unary Append; appendRequest retries around it.
  private readonly unaryAppend: (req: AppendRequest, timeoutMs: number | undefined) => Promise<AppendResponse>;
  private readonly retry: RetryPolicy;
  private readonly opts: ClientOptions;

  constructor(address: string, opts: ClientOptions = {}) {
    this.opts = opts;
    this.retry = opts.retry ?? DEFAULT_RETRY;
    const secure = opts.tls !== undefined && opts.tls !== false;
    const baseUrl = `${secure ? "https" : "http"}://${address}`;
    const tls: TlsOptions = typeof opts.tls === "object" ? opts.tls : {};
    const nodeOptions: SecureClientSessionOptions = {};
    if (tls.ca !== undefined) nodeOptions.ca = tls.ca;
    if (tls.cert !== undefined) nodeOptions.cert = tls.cert;
    if (tls.key !== undefined) nodeOptions.key = tls.key;
    if (tls.serverName !== undefined) nodeOptions.servername = tls.serverName;
    // One HTTP/2 connection for every call and stream, which close() ends.
    this.sessions = new Http2SessionManager(baseUrl, {}, nodeOptions);
    const auth: Interceptor[] = [];
    if (opts.token !== undefined) {
      const value = `Bearer ${opts.token.trim()}`;
      auth.push((next) => (req) => {
        req.header.set("authorization", value);
        return next(req);
      });
    }
    const outer = [...(opts.interceptors ?? []), ...auth];
    const transport = (interceptors: Interceptor[]): Transport =>
      createGrpcTransport({ baseUrl, sessionManager: this.sessions, interceptors });
    let typed = transport([...outer, errorsAndRetries(this.retry)]);
    // Reads skip Connect's per-call machinery unless the caller's own
    // interceptors must see every call.
    if (opts.interceptors === undefined || opts.interceptors.length === 0) {
      const headers: Record<string, string> = { "user-agent": "agentstate-ts" };
      if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token.trim()}`;
      typed = leanReads(typed, this.sessions, headers, this.retry, isRead);
    }
    this.session = connectClient(SessionService, typed);
    this.plan = connectClient(PlanService, typed);
    this.audit = connectClient(AuditService, typed);
    this.feed = connectClient(FeedService, typed);
    // The appender reads the stream's raw statuses (a refusal differs from a
    // break) and makes one attempt; append() retries around it.
    const bare = connectClient(SessionService, transport(outer));
    this.unaryAppend = async (req, timeoutMs) => {
      try {
        return await bare.append(req, { timeoutMs });
      } catch (e) {
        throw forWrite(fromError(e));
      }
    };
    this.appender = new BatchAppender(bare, this.unaryAppend);
  }

  /**
   * Creates a session; its id is made here when not given, so a retry is
   * answered with the same session (created: false). The answer's session
   * is always set.
   */
  async createSession(
    req: MessageInitShape<typeof CreateSessionRequestSchema> = {},
    opts: { timeoutMs?: number } = {},
  ): Promise<CreateSessionResponse & { session: Session }> {
    const msg = create(CreateSessionRequestSchema, req);
    if (msg.sessionId === "") msg.sessionId = newUlid();
    const res = await this.session.create(msg, { timeoutMs: opts.timeoutMs ?? this.opts.timeoutMs });
    if (res.session === undefined) throw new Internal("the node's create answer has no session");
    return res as CreateSessionResponse & { session: Session };
  }

  /**
   * Appends one turn (all its messages get consecutive sequences, or none is
   * stored). Message ids are made before the first attempt, so a retry after
   * a lost answer is answered `duplicate: true` and stores nothing twice. By
   * default the append shares the client's AppendBatches stream with every
   * concurrent append.
   */
  async append(sessionId: string, messages: NewMessageInput[], opts: AppendOptions = {}): Promise<AppendResponse> {
    const req = create(AppendRequestSchema, {
      sessionId,
      messages: messages.map((m) => ({
        ...m,
        role: typeof m.role === "string" ? role(m.role) : m.role,
        messageId: m.messageId || newUlid(),
      })),
      stateDelta: opts.stateDelta,
      scopeDeltas: opts.scopeDeltas,
      expectedNextSequence: opts.expectedNextSequence,
    });
    return this.appendRequest(req, opts.timeoutMs);
  }

  /** Appends a request as given (ids included); retried under the client's policy. */
  appendRequest(req: AppendRequest, timeoutMs: number | undefined = this.opts.timeoutMs): Promise<AppendResponse> {
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    const left = () => (deadline === undefined ? undefined : Math.max(deadline - Date.now(), 1));
    // A conditional append's retry would be refused if the first attempt
    // went in (the session moved on): it is retried after Unavailable only.
    const idempotent = req.expectedNextSequence === undefined && req.messages.every((m) => m.messageId !== "");
    const batched = this.opts.batchedAppends ?? true;
    return withRetries(this.retry, idempotent, deadline, () =>
      batched
        ? this.appender.append(req, left())
        : this.unaryAppend(req, left()),
    );
  }

  /** A session's events as an async iterator, resumed across broken streams; see SessionTail. */
  tailSession(sessionId: string, opts: TailSessionOptions = {}): SessionTail {
    return new SessionTail(this.feed, this.retry, sessionId, opts);
  }

  /** The change feed as an async iterator, resumed across broken streams; see ChangesTail. */
  tailChanges(opts: TailChangesOptions = {}): ChangesTail {
    return new ChangesTail(this.feed, this.retry, opts);
  }

  /** Waits for the appends in flight to be answered, then closes the connection. */
  async close(): Promise<void> {
    await this.appender.close();
    this.sessions.abort();
  }
}

function role(name: string): Role {
  const r = ROLES[name as RoleName];
  if (r === undefined) throw new InvalidArgument(`unknown role ${JSON.stringify(name)}: want user, assistant, system or tool`);
  return r;
}

/** Connects to a node at address (host:port); nothing is sent until the first call. */
export function createClient(address: string, opts: ClientOptions = {}): AgentStateClient {
  return new AgentStateClient(address, opts);
}
