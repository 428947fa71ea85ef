// Bounded retries with exponential backoff and full jitter, as the Python
// client's. UNAVAILABLE (nothing was stored) is retried for every call;
// OUTCOME_UNKNOWN only for a call whose client ids make a second attempt
// harmless. Every attempt sends the very same request, ids included, so a
// retry of a write that did go in is answered as the stored original.
import type { Interceptor, UnaryRequest } from "@connectrpc/connect";
import { AgentStateError, OutcomeUnknown, Unavailable, forWrite, fromError } from "./errors.js";

export interface RetryPolicy {
  /** Most attempts per call, the first included (1: no retries). */
  attempts: number;
  /** Milliseconds before the second attempt. */
  initialBackoffMs: number;
  /** Cap on the milliseconds between attempts. */
  maxBackoffMs: number;
  /** Growth of the backoff per attempt. */
  multiplier: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 5, initialBackoffMs: 50, maxBackoffMs: 2000, multiplier: 2 };
export const NO_RETRY: RetryPolicy = { ...DEFAULT_RETRY, attempts: 1 };

/** The waits before attempts 2..attempts: full jitter over a growing cap, so callers that failed together do not return together. */
export function* backoffs(p: RetryPolicy): Generator<number> {
  let cap = p.initialBackoffMs;
  for (let i = 1; i < p.attempts; i++) {
    yield cap / 2 + Math.random() * (cap / 2);
    cap = Math.min(cap * p.multiplier, p.maxBackoffMs);
  }
}

/** Whether err may be retried: Unavailable always, OutcomeUnknown only for an idempotent request. */
export function retryable(err: AgentStateError, idempotent: boolean): boolean {
  return err instanceof Unavailable || (idempotent && err instanceof OutcomeUnknown);
}

/** Waits ms, or less if signal aborts (then resolves false). */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const onAbort = () => {
      clearTimeout(t);
      resolve(false);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Runs attempt until it succeeds, fails for good, the policy gives up, or
 * deadline (Date.now() milliseconds) would pass during the wait.
 */
export async function withRetries<T>(
  policy: RetryPolicy,
  idempotent: boolean,
  deadline: number | undefined,
  attempt: () => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  let waits: Generator<number> | undefined;
  for (;;) {
    try {
      return await attempt();
    } catch (e) {
      const err = fromError(e);
      waits ??= backoffs(policy);
      const w = waits.next();
      const left = deadline === undefined ? Infinity : deadline - Date.now();
      if (w.done || !retryable(err, idempotent) || left <= w.value || signal?.aborted) throw err;
      if (!(await sleep(w.value, signal))) throw err;
    }
  }
}

// The calls that change nothing: a transport UNAVAILABLE keeps its meaning
// for them (nothing stored), while for every other call it may hide a write
// that went in (errors.forWrite).
const READS = new Set([
  "agentstate.session.v1.SessionService/Get",
  "agentstate.session.v1.SessionService/List",
  "agentstate.session.v1.SessionService/ListMessages",
  "agentstate.session.v1.SessionService/Export",
  "agentstate.session.v1.SessionService/ExportStream",
  "agentstate.session.v1.SessionService/GetState",
  "agentstate.session.v1.SessionService/GetSnapshot",
  "agentstate.session.v1.SessionService/GetItem",
  "agentstate.session.v1.SessionService/ListItems",
  "agentstate.plan.v1.PlanService/History",
  "agentstate.plan.v1.PlanService/ErrorDetails",
  "agentstate.audit.v1.AuditService/List",
  "agentstate.audit.v1.AuditService/Count",
  "agentstate.audit.v1.AuditService/Get",
  "agentstate.audit.v1.AuditService/Verify",
  "agentstate.feed.v1.FeedService/TailSession",
  "agentstate.feed.v1.FeedService/TailChanges",
]);

/** Whether the method (service type name, method name) changes nothing. */
export function isRead(typeName: string, method: string): boolean {
  return READS.has(`${typeName}/${method}`);
}

function fullName(req: { service: { typeName: string }; method: { name: string } }): string {
  return `${req.service.typeName}/${req.method.name}`;
}

/** Whether a unary request may be repeated after OutcomeUnknown: a read, or a write that carries its client id. */
export function idempotent(req: UnaryRequest): boolean {
  const name = fullName(req);
  if (READS.has(name)) return true;
  // The generated messages carry these fields; read them by name, since
  // the interceptor sees every method's request.
  const m = req.message as Record<string, unknown>;
  switch (name) {
    case "agentstate.session.v1.SessionService/Create":
      return m.sessionId !== "";
    case "agentstate.session.v1.SessionService/Append": {
      // A conditional append is refused on its retry if its first attempt
      // went in (the session moved on): retried after Unavailable only.
      const msgs = m.messages as { messageId: string }[];
      return m.expectedNextSequence === undefined && msgs.length > 0 && msgs.every((x) => x.messageId !== "");
    }
    case "agentstate.plan.v1.PlanService/RecordError":
      return m.recordId !== "";
    case "agentstate.audit.v1.AuditService/Record":
      return m.eventId !== "";
    default:
      return false;
  }
}

/**
 * The interceptor every generated client of an AgentStateClient goes
 * through: failures become AgentStateErrors (streams' too), a write's
 * transport UNAVAILABLE becomes OutcomeUnknown, and unary calls are retried
 * under policy within their own timeout.
 */
export function errorsAndRetries(policy: RetryPolicy): Interceptor {
  return (next) => async (req) => {
    const write = !READS.has(fullName(req));
    const convert = (e: unknown) => (write ? forWrite(fromError(e)) : fromError(e));
    if (req.stream) {
      let res;
      try {
        res = await next(req);
      } catch (e) {
        throw convert(e);
      }
      if (!res.stream) return res;
      const messages = res.message;
      return {
        ...res,
        message: (async function* () {
          try {
            yield* messages;
          } catch (e) {
            throw convert(e);
          }
        })(),
      };
    }
    const repeat = idempotent(req);
    let waits: Generator<number> | undefined;
    for (;;) {
      try {
        return await next(req);
      } catch (e) {
        const err = convert(e);
        waits ??= backoffs(policy);
        const w = waits.next();
        // req.signal carries the call's timeout and the caller's signal:
        // the attempts share them, and a wait ends when they do.
        if (w.done || !retryable(err, repeat) || req.signal.aborted) throw err;
        if (!(await sleep(w.value, req.signal))) throw err;
      }
    }
  };
}
