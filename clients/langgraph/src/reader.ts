// Reader: checkpoint tuples from a thread's items. A tuple is its
// checkpoint item, which holds the values of the channels its put changed;
// for each other channel, the blob item of its version (GetItem, all
// concurrently) and the checkpoint item it points at; and its pending
// writes (one ListItems of exactly their prefix). Its cost follows its own
// size, never the thread's.
import type { CheckpointMetadata, CheckpointPendingWrite, CheckpointTuple, SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { TASKS, compareWritesSortKeys, maxChannelVersion, writesSortKey } from "@langchain/langgraph-checkpoint";
import { NotFound } from "@agentstate/client";
import type { AgentStateClient, sessionv1 } from "@agentstate/client";
import { load, parse } from "./codec.js";
import type { BlobItem, CheckpointItem, Typed, WriteItem } from "./codec.js";
import { CHECKPOINTS, KIND_WRITE, blobKey, checkpointKey, checkpointKind, writesPrefix } from "./keys.js";

type Message = sessionv1.Message;
// Item reads by key, shared by the tuples of one read: the checkpoints of a
// list page share the versions of the channels they did not change.
type ItemCache = Map<string, Promise<Message | undefined>>;

// A ListItems page is at most 1,000 messages.
const MAX_PAGE = 1000;
// Page size of a list that filters on metadata or on "before", where the
// items it skips cannot be told from the key.
const FILTER_PAGE = 100;

export interface CheckpointsOptions {
  limit?: number;
  /** Only checkpoints whose id sorts before this one. */
  beforeId?: string;
  /** The namespace of beforeId, when known: the scan then starts at that checkpoint. */
  beforeNs?: string;
  /** Only checkpoints whose metadata has these values. */
  filter?: Record<string, unknown>;
}

export class Reader {
  constructor(
    private readonly client: AgentStateClient,
    private readonly serde: SerializerProtocol,
  ) {}

  /** The tuple of the checkpoint stored under key; undefined when there is none. */
  async byKey(sessionId: string, key: string): Promise<CheckpointTuple | undefined> {
    let msg: Message | undefined;
    try {
      msg = await this.item(sessionId, key);
    } catch (e) {
      if (e instanceof NotFound) return undefined;
      throw e;
    }
    return msg === undefined ? undefined : this.tuple(sessionId, msg);
  }

  /**
   * The tuple of checkpoint id of namespace ns: its item and its pending
   * writes are read together (the writes' prefix is known from the id), then
   * its channel values. NotFound when there is no such checkpoint.
   */
  async byId(sessionId: string, ns: string, id: string): Promise<CheckpointTuple | undefined> {
    const writes = this.writes(sessionId, ns, id);
    writes.catch(() => {}); // awaited below unless the checkpoint read fails first
    const msg = await this.item(sessionId, checkpointKey(ns, id));
    if (msg === undefined) return undefined;
    return this.assemble(sessionId, parse<CheckpointItem>(msg.content, msg.itemKey), writes);
  }

  /** The tuple of the namespace's newest checkpoint; undefined when it has none. */
  async latest(sessionId: string, ns: string): Promise<CheckpointTuple | undefined> {
    const page = await this.client.session.listItems({
      sessionId,
      kind: checkpointKind(ns),
      newestFirst: true,
      limit: 1,
    });
    const msg = page.messages[0];
    return msg === undefined ? undefined : this.tuple(sessionId, msg);
  }

  private async item(sessionId: string, itemKey: string): Promise<Message | undefined> {
    return (await this.client.session.getItem({ sessionId, itemKey })).message;
  }

  /**
   * The checkpoints of namespace ns (of all when undefined), newest first,
   * as tuples. Pages are as large as what is left to return (filters
   * aside), and a page's tuples are read concurrently, sharing their reads.
   */
  async *checkpoints(sessionId: string, ns: string | undefined, opts: CheckpointsOptions): AsyncGenerator<CheckpointTuple> {
    // One namespace: its kind. All of them: the key prefix of every
    // checkpoint, which the node reads in key order (a list across
    // namespaces reads the thread's checkpoints to order them).
    const select = ns !== undefined ? { kind: checkpointKind(ns) } : { keyPrefix: CHECKPOINTS };
    let left = opts.limit;
    let cursor: bigint | undefined;
    let cache: ItemCache = new Map();
    const before = opts.beforeId;
    if (before !== undefined && opts.beforeNs !== undefined) {
      // LangGraph's ids are time-ordered, so the checkpoints before it were
      // stored before it: the scan starts there, not at the newest, and
      // pages are sized to the limit (the id filter then skips nothing).
      const m = await this.cached(sessionId, checkpointKey(opts.beforeNs, before), cache);
      if (m !== undefined) cursor = m.sequence;
    }
    const filtering =
      (before !== undefined && cursor === undefined) || (opts.filter !== undefined && Object.keys(opts.filter).length > 0);
    for (;;) {
      let want = left ?? MAX_PAGE;
      if (filtering && left !== undefined) want = Math.max(left, FILTER_PAGE);
      const page = await this.client.session.listItems({
        sessionId,
        ...select,
        newestFirst: true,
        limit: Math.min(want, MAX_PAGE),
        cursorSequence: cursor,
      });
      // A page's reads are shared by its tuples only, so memory stays a page's.
      cache = new Map(page.messages.map((m) => [m.itemKey, Promise.resolve(m)]));
      const items = page.messages
        .map((m) => ({ m, item: parse<CheckpointItem>(m.content, m.itemKey) }))
        .filter(({ item }) => before === undefined || item.id < before);
      const selected: { m: Message; item: CheckpointItem }[] = [];
      for (const x of items) {
        if (left !== undefined && selected.length >= left) break;
        if (opts.filter !== undefined && !this.matches(await load(this.serde, x.item.metadata), opts.filter)) continue;
        selected.push(x);
      }
      const tuples = await Promise.all(selected.map(({ item }) => this.assemble(sessionId, item, undefined, cache)));
      for (const t of tuples) yield t;
      if (left !== undefined) {
        left -= tuples.length;
        if (left <= 0) return;
      }
      if (page.nextCursorSequence === undefined) return;
      cursor = page.nextCursorSequence;
    }
  }

  /** Whether metadata holds every value of filter. */
  matches(metadata: CheckpointMetadata | undefined, filter: Record<string, unknown> | undefined): boolean {
    if (filter === undefined) return true;
    const md = (metadata ?? {}) as Record<string, unknown>;
    return Object.entries(filter).every(([k, v]) => md[k] === v);
  }

  /** The tuple of a checkpoint item. */
  tuple(sessionId: string, msg: Message): Promise<CheckpointTuple> {
    return this.assemble(sessionId, parse<CheckpointItem>(msg.content, msg.itemKey));
  }

  private async assemble(
    sessionId: string,
    item: CheckpointItem,
    writes: Promise<CheckpointPendingWrite[]> = this.writes(sessionId, item.ns, item.id),
    cache: ItemCache = new Map(),
  ): Promise<CheckpointTuple> {
    const checkpoint = await load(this.serde, item.checkpoint);
    const [metadata, pendingWrites, values] = await Promise.all([
      load(this.serde, item.metadata),
      writes,
      this.values(sessionId, item, checkpoint.channel_versions ?? {}, cache),
    ]);
    checkpoint.channel_values = values;
    if (checkpoint.v < 4 && item.parent !== undefined) {
      await this.migratePendingSends(sessionId, item, checkpoint);
    }
    const config = { configurable: { thread_id: item.thread, checkpoint_ns: item.ns, checkpoint_id: item.id } };
    const tuple: CheckpointTuple = { config, checkpoint, metadata, pendingWrites };
    if (item.parent !== undefined) {
      tuple.parentConfig = { configurable: { thread_id: item.thread, checkpoint_ns: item.ns, checkpoint_id: item.parent } };
    }
    return tuple;
  }

  // A channel's value at a version nobody stored (a put whose newVersions
  // left it out) is absent from the checkpoint, as in LangGraph's savers.
  private async values(
    sessionId: string,
    item: CheckpointItem,
    versions: Record<string, string | number>,
    cache: ItemCache,
  ): Promise<Record<string, unknown>> {
    const entries = await Promise.all(
      Object.entries(versions).map(async ([channel, version]) => {
        const typed = inline(item, channel, version) ?? (await this.blob(sessionId, item.ns, channel, version, cache));
        return typed === undefined ? undefined : ([channel, await load(this.serde, typed)] as const);
      }),
    );
    const out: Record<string, unknown> = {};
    for (const e of entries) if (e !== undefined) out[e[0]] = e[1];
    return out;
  }

  // A channel version's serialized value: its blob item names the checkpoint
  // whose item holds it. Undefined when never stored or stored empty.
  private async blob(
    sessionId: string,
    ns: string,
    channel: string,
    version: string | number,
    cache: ItemCache,
  ): Promise<Typed | undefined> {
    const key = blobKey(ns, channel, version);
    const pointer = await this.cached(sessionId, key, cache);
    const at = pointer === undefined ? undefined : parse<BlobItem>(pointer.content, key).at;
    if (at === undefined) return undefined;
    const holder = await this.cached(sessionId, checkpointKey(ns, at), cache);
    return holder === undefined ? undefined : inline(parse<CheckpointItem>(holder.content, holder.itemKey), channel, version);
  }

  private cached(sessionId: string, key: string, cache: ItemCache): Promise<Message | undefined> {
    let p = cache.get(key);
    if (p === undefined) {
      p = this.item(sessionId, key).catch((e) => {
        if (e instanceof NotFound) return undefined;
        throw e;
      });
      cache.set(key, p);
    }
    return p;
  }

  /** A checkpoint's pending writes in LangGraph's order (task path, task id, index). */
  private async writes(sessionId: string, ns: string, checkpointId: string): Promise<CheckpointPendingWrite[]> {
    const prefix = writesPrefix(ns, checkpointId);
    // The newest special write of a (task, index) replaces the older ones.
    const byTaskIdx = new Map<string, WriteItem>();
    let cursor: bigint | undefined;
    for (;;) {
      const page = await this.client.session.listItems({
        sessionId,
        kind: KIND_WRITE,
        keyPrefix: prefix,
        limit: MAX_PAGE,
        cursorSequence: cursor,
      });
      for (const m of page.messages) {
        const w = parse<WriteItem>(m.content, m.itemKey);
        byTaskIdx.set(JSON.stringify([w.task, w.idx]), w);
      }
      if (page.nextCursorSequence === undefined) break;
      cursor = page.nextCursorSequence;
    }
    const ordered = [...byTaskIdx.values()].sort((a, b) =>
      compareWritesSortKeys(writesSortKey(a.path, a.task, a.idx), writesSortKey(b.path, b.task, b.idx)),
    );
    return Promise.all(
      ordered.map(async (w): Promise<CheckpointPendingWrite> => [w.task, w.channel, await load(this.serde, w.value)]),
    );
  }

  // Checkpoints before version 4 kept pending sends as the parent's TASKS
  // writes; LangGraph's savers move them into the TASKS channel on read.
  private async migratePendingSends(sessionId: string, item: CheckpointItem, checkpoint: any): Promise<void> {
    const parentWrites = await this.writes(sessionId, item.ns, item.parent!);
    checkpoint.channel_values ??= {};
    checkpoint.channel_values[TASKS] = parentWrites.filter(([, ch]) => ch === TASKS).map(([, , v]) => v);
    checkpoint.channel_versions ??= {};
    const versions = Object.values(checkpoint.channel_versions) as (string | number)[];
    checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : 1;
  }
}

// The value of channel at version that the checkpoint item holds itself.
function inline(item: CheckpointItem, channel: string, version: string | number): Typed | undefined {
  const v = item.values?.[channel];
  return v !== undefined && String(v[0]) === String(version) ? v[1] : undefined;
}
