// Threads: which session holds a thread. The session's client key is the
// thread id under the saver's prefix, unique in its namespace, so any
// process finds it (Get by client key) and two processes creating it at
// once end with one session (the second create is ALREADY_EXISTS).
import { createHash } from "node:crypto";
import { AlreadyExists, NotFound } from "@agentstate/client";
import type { AgentStateClient } from "@agentstate/client";

export interface ThreadOptions {
  /** The agentstate namespace of the threads' sessions (default "local"). */
  namespace?: string;
  /** Prefix of the sessions' client keys (default "langgraph:"). */
  keyPrefix?: string;
  /** The sessions' actor name, which list() without a thread_id selects on (default "langgraph"). */
  actorName?: string;
}

const MAX_CLIENT_KEY = 256;

export class Threads {
  readonly namespace: string;
  readonly keyPrefix: string;
  readonly actorName: string;
  // thread id -> session id. Sessions are never renamed, only deleted, so an
  // entry is stale only after a deleteThread (withSession resolves again).
  private readonly cache = new Map<string, string>();

  constructor(
    private readonly client: AgentStateClient,
    opts: ThreadOptions,
  ) {
    this.namespace = opts.namespace ?? "local";
    this.keyPrefix = opts.keyPrefix ?? "langgraph:";
    this.actorName = opts.actorName ?? "langgraph";
  }

  /** The thread's client key: the prefixed id, or the prefixed SHA-256 of one too long for a key. */
  clientKey(thread: string): string {
    const k = this.keyPrefix + thread;
    if (Buffer.byteLength(k) <= MAX_CLIENT_KEY) return k;
    return `${this.keyPrefix}#${createHash("sha256").update(thread).digest("base64url")}`;
  }

  /** The thread's session id; undefined when the thread has none. */
  async find(thread: string): Promise<string | undefined> {
    const cached = this.cache.get(thread);
    if (cached !== undefined) return cached;
    try {
      const res = await this.client.session.get({ namespace: this.namespace, clientKey: this.clientKey(thread) });
      const id = res.session!.sessionId;
      this.cache.set(thread, id);
      return id;
    } catch (e) {
      if (e instanceof NotFound) return undefined;
      throw e;
    }
  }

  /** The thread's session id, creating the session when the thread has none. */
  async ensure(thread: string): Promise<string> {
    const found = await this.find(thread);
    if (found !== undefined) return found;
    try {
      const res = await this.client.createSession({
        namespace: this.namespace,
        actorName: this.actorName,
        clientKey: this.clientKey(thread),
        metadataJson: JSON.stringify({ thread_id: thread }),
      });
      this.cache.set(thread, res.session.sessionId);
      return res.session.sessionId;
    } catch (e) {
      // Another process created it first.
      if (!(e instanceof AlreadyExists)) throw e;
      const id = await this.find(thread);
      if (id === undefined) throw e;
      return id;
    }
  }

  /**
   * Runs fn on the thread's session (created first when create is set;
   * undefined when absent and not created). A NotFound from a session
   * taken from the cache may mean the thread was deleted and made again
   * elsewhere: the session is looked up once more and, if it changed, fn
   * runs again on it.
   */
  async withSession<T>(thread: string, create: boolean, fn: (sessionId: string) => Promise<T>): Promise<T | undefined> {
    const cached = this.cache.get(thread);
    const resolve = () => (create ? this.ensure(thread) : this.find(thread));
    const id = cached ?? (await resolve());
    if (id === undefined) return undefined;
    try {
      return await fn(id);
    } catch (e) {
      if (!(e instanceof NotFound) || cached === undefined) throw e;
      this.cache.delete(thread);
      const again = await resolve();
      if (again === undefined) return undefined;
      if (again === id) throw e;
      return fn(again);
    }
  }

  /** The thread's session, if it has one, as a one-element stream. */
  async *one(thread: string): AsyncGenerator<string> {
    const id = await this.find(thread);
    if (id !== undefined) yield id;
  }

  /** Every thread session of the namespace (the saver's actor name and key prefix), oldest first. */
  async *all(): AsyncGenerator<string> {
    let cursor = "";
    for (;;) {
      const res = await this.client.session.list({ namespace: this.namespace, actorName: this.actorName, limit: 1000, cursor });
      for (const s of res.sessions) if (s.clientKey.startsWith(this.keyPrefix)) yield s.sessionId;
      if (res.nextCursor === "") return;
      cursor = res.nextCursor;
    }
  }

  /** Deletes the thread's session with everything in it; a thread without one is left as is. */
  async delete(thread: string): Promise<void> {
    this.cache.delete(thread);
    const id = await this.find(thread);
    if (id === undefined) return;
    this.cache.delete(thread);
    try {
      await this.client.session.delete({ sessionId: id });
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
    }
  }
}
