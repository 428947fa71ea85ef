// AgentStateSession: the OpenAI Agents SDK's Session on an agentstate
// session. Every operation is one of the node's history operations, so
// concurrent processes sharing a session id stay consistent with no
// client-side bookkeeping: a pop is an atomic, conditional removal of the
// newest message (ReplaceSuffix), reads are indexed newest-first pages
// (ListItems), and a history transaction is one conditional replacement or
// one append whose ids come from its operation id.
import { UserError } from "@openai/agents-core";
import type {
  AgentInputItem,
  SessionHistoryTransaction,
  SessionHistoryTransactionArgs,
  SessionHistoryTransactionAwareSession,
} from "@openai/agents-core";
import { AlreadyExists, NotFound, OutcomeUnknown, SequenceMismatch } from "@agentstate/client";
import type { AgentStateClient, sessionv1 } from "@agentstate/client";
import { canonicalJson, digest, digestOf, itemMessage, itemOf, opPrefix } from "./items.js";
import type { ItemMessage } from "./items.js";

export interface AgentStateSessionOptions {
  /** The SDK's session id: the agentstate session's client key (default: a new UUID). */
  sessionId?: string;
  /** The agentstate namespace of the sessions (default "openai-agents"). */
  namespace?: string;
  /** Attempts of a pop or a replacement that other writers keep overtaking (default 100). */
  maxConflictRetries?: number;
}

/** Items per read page: the node's ListItems maximum. */
const PAGE = 1000;

/**
 * A Session whose items are the messages of one agentstate session, found
 * by its client key (the SDK's session id) in a namespace; it is created on
 * first use. The client is the caller's, and so is closing it.
 */
export class AgentStateSession implements SessionHistoryTransactionAwareSession {
  readonly namespace: string;
  private readonly id: string;
  private readonly maxConflictRetries: number;
  // The agentstate session id, once resolved; forgotten when the session
  // is found deleted (a clearSession, here or in another process).
  private sid: Promise<string> | undefined;

  constructor(
    private readonly client: AgentStateClient,
    opts: AgentStateSessionOptions = {},
  ) {
    this.id = opts.sessionId ?? crypto.randomUUID();
    this.namespace = opts.namespace ?? "openai-agents";
    this.maxConflictRetries = opts.maxConflictRetries ?? 100;
  }

  /** The SDK's session id; the agentstate session exists once this resolves. */
  async getSessionId(): Promise<string> {
    await this.resolve();
    return this.id;
  }

  /** All items oldest first, or the newest limit of them oldest first. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    if (limit !== undefined && limit <= 0) return [];
    return this.withSession(async (sid) => {
      const newestFirst = limit !== undefined;
      const got: sessionv1.Message[] = [];
      let cursor: bigint | undefined;
      for (;;) {
        const want = newestFirst ? Math.min(limit - got.length, PAGE) : PAGE;
        const r = await this.client.session.listItems({ sessionId: sid, newestFirst, limit: want, cursorSequence: cursor });
        got.push(...r.messages);
        if (r.nextCursorSequence === undefined || r.messages.length === 0) break;
        if (newestFirst && got.length >= limit) break;
        cursor = r.nextCursorSequence;
      }
      if (newestFirst) got.reverse();
      return got.map(itemOf);
    });
  }

  /** Appends items as one turn: all of them or none, each stored once however often the client retries. */
  async addItems(items: AgentInputItem[]): Promise<void> {
    if (items.length === 0) return;
    const messages = items.map((item) => itemMessage(item));
    await this.withSession((sid) => this.client.session.append({ sessionId: sid, messages }));
  }

  /**
   * Removes and returns the newest item: a removal conditional on the next
   * sequence just read, retried when another writer got in between, so each
   * item is taken by exactly one pop. An OutcomeUnknown is passed on: the
   * item may have been removed, and only the lost answer held it.
   */
  async popItem(): Promise<AgentInputItem | undefined> {
    return this.withSession(async (sid) => {
      for (let attempt = 1; ; attempt++) {
        const newest = (await this.client.session.listItems({ sessionId: sid, newestFirst: true, limit: 1 })).messages[0];
        if (newest === undefined) return undefined;
        try {
          const r = await this.client.session.replaceSuffix({
            sessionId: sid,
            from: { case: "removeLast", value: 1n },
            expectedNextSequence: newest.sequence + 1n,
          });
          const removed = r.removed[0];
          return removed === undefined ? undefined : itemOf(removed);
        } catch (e) {
          if (!(e instanceof SequenceMismatch) || attempt >= this.maxConflictRetries) throw e;
        }
      }
    });
  }

  /** Deletes the agentstate session (its items, and the record of applied operations); the next use creates it anew. */
  async clearSession(): Promise<void> {
    this.sid = undefined;
    for (;;) {
      let sid: string;
      try {
        sid = (await this.client.session.get({ namespace: this.namespace, clientKey: this.id })).session?.sessionId ?? "";
      } catch (e) {
        if (e instanceof NotFound) return;
        throw e;
      }
      try {
        await this.client.session.delete({ sessionId: sid });
        return;
      } catch (e) {
        if (!(e instanceof NotFound)) throw e;
        // Deleted meanwhile, and perhaps created again: look again.
      }
    }
  }

  /**
   * Replaces the whole history with items (a compaction marker and what it
   * keeps) in one conditional replacement: a writer that got in between
   * makes it read again and retry, so nothing appended meanwhile survives
   * unseen behind the marker, and no reader sees a half-replaced history.
   */
  async replaceHistoryWithCompaction(items: AgentInputItem[]): Promise<void> {
    const messages = items.map((item) => itemMessage(item));
    await this.withSession(async (sid) => {
      for (let attempt = 1; ; attempt++) {
        const s = await this.head(sid);
        try {
          await this.client.session.replaceSuffix({
            sessionId: sid,
            from: { case: "fromSequence", value: s.firstSequence },
            expectedNextSequence: s.messageCount,
            messages,
          });
          return;
        } catch (e) {
          if (!(e instanceof SequenceMismatch || e instanceof OutcomeUnknown) || attempt >= this.maxConflictRetries) throw e;
        }
      }
    });
  }

  /**
   * Applies an append or a suffix replacement once per operation id. The
   * transaction's items are stored with ids made from the operation id and
   * carry the transaction's digest, so a repeat finds them: the same
   * transaction succeeds without applying it again, another is refused.
   * A replacement is conditional on the next sequence at which the
   * expected suffix was read. Nothing is written before the items are
   * checked to be JSON.
   */
  async applyHistoryTransaction(args: SessionHistoryTransactionArgs): Promise<void> {
    const { operationId, transaction } = checkArgs(args);
    const d = digest(transaction);
    const prefix = opPrefix(operationId);
    const items = transaction.type === "append_items" ? transaction.items : transaction.replacement;
    const messages = items.map((item, i) => itemMessage(item, `${prefix}${i}`, d));
    if (messages.length === 0) {
      // Nothing would carry the operation id: an empty append changes
      // nothing however often it is repeated, a pure removal could not
      // tell its own retry from a suffix that no longer matches.
      if (transaction.type === "append_items") return;
      throw new UserError("Session history replace_suffix transactions need a non-empty replacement on this session.");
    }
    await this.withSession(async (sid) => {
      for (let attempt = 1; ; attempt++) {
        if (await this.applied(sid, prefix, d)) return;
        try {
          if (transaction.type === "append_items") {
            await this.client.session.append({ sessionId: sid, messages });
          } else {
            await this.replaceSuffix(sid, transaction.expectedSuffix, messages);
          }
          return;
        } catch (e) {
          // A suffix that no longer matches may be this operation's own
          // doing: another process applying it between the check above
          // and the read of the suffix.
          if (e instanceof SuffixMismatch) {
            if (await this.applied(sid, prefix, d)) return;
            throw new UserError(e.message);
          }
          // Another writer got in (or this operation's own earlier attempt,
          // or another transaction under this id): look again.
          const again = e instanceof SequenceMismatch || e instanceof OutcomeUnknown || e instanceof AlreadyExists;
          if (!again || attempt >= this.maxConflictRetries) throw e;
        }
      }
    });
  }

  private async replaceSuffix(sid: string, expectedSuffix: AgentInputItem[], messages: ItemMessage[]): Promise<void> {
    const n = expectedSuffix.length;
    let next: bigint;
    if (n === 0) {
      next = (await this.head(sid)).messageCount;
    } else {
      const r = await this.client.session.listItems({ sessionId: sid, newestFirst: true, limit: n });
      const got = r.messages.slice().reverse();
      if (got.length !== n || got.some((m, i) => canonicalJson(itemOf(m)) !== canonicalJson(expectedSuffix[i]))) {
        throw new SuffixMismatch("Session history suffix no longer matches the transaction precondition.");
      }
      next = r.messages[0].sequence + 1n;
    }
    await this.client.session.replaceSuffix({
      sessionId: sid,
      from: { case: "removeLast", value: BigInt(n) },
      expectedNextSequence: next,
      messages,
    });
  }

  /** Whether the operation's first item is stored: with digest d (applied), or another (refused). */
  private async applied(sid: string, prefix: string, d: string): Promise<boolean> {
    let stored: sessionv1.Message | undefined;
    try {
      stored = (await this.client.session.getItem({ sessionId: sid, itemKey: `${prefix}0` })).message;
    } catch (e) {
      if (e instanceof NotFound) return false;
      throw e;
    }
    if (stored === undefined) return false;
    if (digestOf(stored) !== d) {
      throw new UserError("Session history operation was already applied with a different transaction.");
    }
    return true;
  }

  private async head(sid: string): Promise<sessionv1.Session> {
    const s = (await this.client.session.get({ sessionId: sid })).session;
    if (s === undefined) throw new NotFound(`session ${sid}: the node's answer has no session`);
    return s;
  }

  private resolve(): Promise<string> {
    this.sid ??= this.lookupOrCreate().catch((e: unknown) => {
      this.sid = undefined;
      throw e;
    });
    return this.sid;
  }

  private async lookupOrCreate(): Promise<string> {
    for (let attempt = 1; ; attempt++) {
      try {
        const s = (await this.client.session.get({ namespace: this.namespace, clientKey: this.id })).session;
        if (s !== undefined) return s.sessionId;
      } catch (e) {
        if (!(e instanceof NotFound)) throw e;
      }
      try {
        const r = await this.client.createSession({ namespace: this.namespace, clientKey: this.id, actorName: "openai-agents" });
        return r.session.sessionId;
      } catch (e) {
        // Another process created it first: read it.
        if (!(e instanceof AlreadyExists) || attempt >= 3) throw e;
      }
    }
  }

  /** Runs op on the session, again on a new one if it was deleted meanwhile (by a clearSession). */
  private async withSession<T>(op: (sid: string) => Promise<T>): Promise<T> {
    const sid = await this.resolve();
    try {
      return await op(sid);
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
      if (this.sid !== undefined && (await this.sid.catch(() => "")) === sid) this.sid = undefined;
      return op(await this.resolve());
    }
  }
}

/** A replacement's expected suffix is not the history's (answered as the SDK's UserError). */
class SuffixMismatch extends Error {}

/** The SDK's own checks of a transaction's shape (its MemorySession makes them too), before anything is written. */
function checkArgs(args: SessionHistoryTransactionArgs): { operationId: string; transaction: SessionHistoryTransaction } {
  const operationId = (args as { operationId?: unknown } | undefined)?.operationId;
  const transaction = (args as { transaction?: unknown } | undefined)?.transaction as Record<string, unknown> | undefined;
  if (typeof operationId !== "string" || operationId.trim() === "") {
    throw new UserError("Session history transaction operationId must be a non-empty string.");
  }
  if (transaction === null || typeof transaction !== "object") {
    throw new UserError("Session history transaction must be an object.");
  }
  const keys = Object.keys(transaction).sort().join(",");
  if (transaction.type === "append_items") {
    if (keys !== "items,type" || !Array.isArray(transaction.items)) {
      throw new UserError("Session history append transaction fields are invalid.");
    }
  } else if (transaction.type === "replace_suffix") {
    if (keys !== "expectedSuffix,replacement,type" || !Array.isArray(transaction.expectedSuffix) || !Array.isArray(transaction.replacement)) {
      throw new UserError("Session history suffix transaction fields are invalid.");
    }
  } else {
    throw new UserError("Unsupported session history transaction type.");
  }
  return { operationId, transaction: transaction as unknown as SessionHistoryTransaction };
}
