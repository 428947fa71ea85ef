// The batched append stream (SessionService.AppendBatches): the appends of
// every concurrent caller of one client travel on one stream. Appends that
// wait while a batch is being sent go together in the next AppendBatch,
// each under its own tag; each caller gets the outcome of its tag.
//
// An append's life: pending until a batch takes it, then in flight under its
// tag until its outcome arrives or the stream ends. Appends are held back
// until the node's response headers arrive (it sends them as the stream
// opens), so an append failed before them was never sent (Unavailable: a
// retry is always safe) and only one sent may have been applied
// (OutcomeUnknown: retried with the same message ids, which the node answers
// as a duplicate if the first attempt went in).
import { create, toBinary } from "@bufbuild/protobuf";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import type { AppendRequest, AppendResponse, AppendStreamResponse } from "./gen/agentstate/session/v1/session_pb.js";
import { AppendBatchSchema, AppendRequestSchema, SessionService } from "./gen/agentstate/session/v1/session_pb.js";
import { AgentStateError, OutcomeUnknown, Unavailable, fromError, fromProto } from "./errors.js";

// Bounds of one AppendBatch, as the Go and Python clients': far below the
// node's 4 MiB receive limit. A larger append goes alone as a unary Append.
export const MAX_BATCH_BYTES = 1 << 20;
export const MAX_BATCH_APPENDS = 1024;

// The node refuses these for the whole stream: every append gets the refusal.
const REFUSALS = new Set([Code.Unauthenticated, Code.PermissionDenied, Code.Unimplemented]);

interface Call {
  tag: bigint;
  req: AppendRequest;
  size: number;
  resolve(r: AppendResponse): void;
  reject(e: AgentStateError): void;
}

/** What an appender did: streams opened, batches sent, appends they carried. */
export interface AppenderCounters {
  streamsOpened: number;
  batchesSent: number;
  appendsSent: number;
}

/** One AppendBatches stream; after it ends (for any reason) the appender opens another. */
class BatchStream {
  private pending: Call[] = [];
  private readonly inflight = new Map<bigint, Call>();
  private established = false;
  private closing = false;
  private nextTag = 0n;
  private wake: (() => void) | undefined;
  private readonly abort = new AbortController();
  failed: AgentStateError | undefined;
  readonly done: Promise<void>;

  constructor(
    client: Client<typeof SessionService>,
    private readonly counters: AppenderCounters,
  ) {
    const outcomes = client.appendBatches(this.batches(), {
      signal: this.abort.signal,
      onHeader: () => {
        this.established = true;
        this.kick();
      },
    });
    this.done = this.read(outcomes);
  }

  /** Queues req (encoded size known); its promise settles with its outcome. */
  enqueue(req: AppendRequest, size: number, timeoutMs: number | undefined): Promise<AppendResponse> {
    if (this.failed !== undefined) return Promise.reject(this.failed);
    return new Promise<AppendResponse>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const call: Call = {
        tag: ++this.nextTag,
        req,
        size,
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
          this.drained();
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
          this.drained();
        },
      };
      if (timeoutMs !== undefined) {
        // Past the deadline an append not sent is withdrawn (nothing stored);
        // one sent may have gone in, and its late outcome is dropped.
        timer = setTimeout(() => {
          const i = this.pending.indexOf(call);
          if (i >= 0) {
            this.pending.splice(i, 1);
            call.reject(new Unavailable("append not sent before the deadline"));
          } else if (this.inflight.delete(call.tag)) {
            call.reject(new OutcomeUnknown("no append answer before the deadline"));
          }
        }, timeoutMs);
      }
      this.pending.push(call);
      this.kick();
    });
  }

  /** Refuses nothing already queued: ends the stream once every append queued has its outcome (or its deadline passed). */
  close(): Promise<void> {
    this.closing = true;
    this.drained();
    return this.done;
  }

  // Once closing and nothing waits for the stream, it ends (its reader sees
  // the abort and fails nothing: nothing is left).
  private drained(): void {
    if (this.closing && this.pending.length === 0 && this.inflight.size === 0) this.abort.abort();
    this.kick();
  }

  private kick(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  private async *batches(): AsyncGenerator<MessageInitShape<typeof AppendBatchSchema>> {
    for (;;) {
      while (this.failed === undefined && !(this.established && this.pending.length > 0)) {
        await new Promise<void>((r) => (this.wake = r));
      }
      if (this.failed !== undefined) return;
      yield this.take();
    }
  }

  /** The oldest pending appends within one message's bounds, now in flight. */
  private take(): MessageInitShape<typeof AppendBatchSchema> {
    let n = 0;
    let bytes = 0;
    for (const c of this.pending) {
      if (n >= MAX_BATCH_APPENDS || (n > 0 && bytes + c.size > MAX_BATCH_BYTES)) break;
      bytes += c.size;
      n++;
    }
    const calls = this.pending.splice(0, n);
    for (const c of calls) this.inflight.set(c.tag, c);
    this.counters.batchesSent++;
    this.counters.appendsSent += n;
    return create(AppendBatchSchema, { appends: calls.map((c) => ({ tag: c.tag, request: c.req })) });
  }

  private async read(outcomes: AsyncIterable<{ outcomes: { tag: bigint; outcome?: AppendStreamResponse }[] }>): Promise<void> {
    let cause: unknown;
    try {
      for await (const msg of outcomes) {
        for (const o of msg.outcomes) {
          const call = this.inflight.get(o.tag);
          if (call === undefined) continue; // withdrawn at its deadline
          this.inflight.delete(o.tag);
          const out = o.outcome?.outcome;
          if (out?.case === "response") call.resolve(out.value);
          else if (out?.case === "error") call.reject(fromProto(out.value));
          else call.reject(new OutcomeUnknown(`append outcome for tag ${o.tag} is empty`));
        }
      }
    } catch (e) {
      cause = e;
    }
    this.end(cause);
  }

  /** Fails what the ended stream leaves: not sent Unavailable, sent OutcomeUnknown, or the node's refusal to both. */
  private end(cause: unknown): void {
    let unsent: AgentStateError;
    let sent: AgentStateError;
    const ce = cause === undefined ? undefined : ConnectError.from(cause);
    if (ce !== undefined && REFUSALS.has(ce.code)) {
      unsent = sent = fromError(cause);
    } else {
      const why = ce === undefined ? "closed by the node" : `${Code[ce.code]}: ${ce.rawMessage}`;
      const opts = { grpcCode: ce?.code, cause };
      unsent = new Unavailable(`append not sent: append stream ended: ${why}`, opts);
      sent = new OutcomeUnknown(`append stream ended before the answer: ${why}`, opts);
    }
    this.failed = unsent;
    for (const c of this.pending.splice(0)) c.reject(unsent);
    for (const c of this.inflight.values()) c.reject(sent);
    this.inflight.clear();
    this.abort.abort();
    this.kick();
  }
}

/** Shares one AppendBatches stream among all concurrent appends of a client. */
export class BatchAppender {
  private stream: BatchStream | undefined;
  private closed = false;
  readonly counters: AppenderCounters = { streamsOpened: 0, batchesSent: 0, appendsSent: 0 };

  constructor(
    private readonly client: Client<typeof SessionService>,
    private readonly unary: (req: AppendRequest, timeoutMs: number | undefined) => Promise<AppendResponse>,
  ) {}

  /** One attempt of an append: its response, the node's error, Unavailable (not sent) or OutcomeUnknown (sent). */
  append(req: AppendRequest, timeoutMs: number | undefined): Promise<AppendResponse> {
    if (this.closed) return Promise.reject(new Unavailable("append batch client is closed"));
    const size = toBinary(AppendRequestSchema, req).length;
    if (size > MAX_BATCH_BYTES) return this.unary(req, timeoutMs);
    if (this.stream === undefined || this.stream.failed !== undefined) {
      this.stream = new BatchStream(this.client, this.counters);
      this.counters.streamsOpened++;
    }
    return this.stream.enqueue(req, size, timeoutMs);
  }

  /** Refuses later appends and waits for those in flight to be answered. */
  async close(): Promise<void> {
    this.closed = true;
    const s = this.stream;
    this.stream = undefined;
    await s?.close();
  }
}
