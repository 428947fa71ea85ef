// AgentStateSaver: LangGraph's BaseCheckpointSaver on an agentstate node.
// One session per thread; every checkpoint, channel value and pending write
// is a keyed item of it (see keys.ts), so each read is a GetItem or a
// ListItems page of exactly what it returns, and each write one atomic
// append. README.md explains the design.
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  WRITES_IDX_MAP,
  copyCheckpoint,
  getCheckpointId,
} from "@langchain/langgraph-checkpoint";
import type {
  ChannelVersions,
  Checkpoint,
  CheckpointListOptions,
  CheckpointMetadata,
  CheckpointTuple,
  PendingWrite,
  SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import { AlreadyExists, NotFound, newUlid, sessionv1 } from "@agentstate/client";
import type { AgentStateClient } from "@agentstate/client";
import { dump, parse } from "./codec.js";
import type { BlobItem, CheckpointItem, WriteItem } from "./codec.js";
import { CheckpointConflict } from "./errors.js";
import {
  KIND_BLOB,
  KIND_CHILD,
  KIND_WRITE,
  blobKey,
  checkpointKey,
  checkpointKind,
  childKey,
  writeKey,
} from "./keys.js";
import { Reader } from "./reader.js";
import { Threads } from "./threads.js";
import type { ThreadOptions } from "./threads.js";

type NewMessage = Parameters<AgentStateClient["session"]["append"]>[0]["messages"] extends (infer M)[] | undefined ? M : never;

export interface AgentStateSaverOptions extends ThreadOptions {
  /**
   * Allow a second child of one checkpoint (LangGraph's replay and fork from
   * an earlier checkpoint). By default a put whose parent already has a
   * child is refused with CheckpointConflict, so two workers resuming one
   * thread from the same checkpoint cannot fork its chain.
   */
  allowForks?: boolean;
  serde?: SerializerProtocol;
}

/** A LangGraph checkpointer storing each thread as one agentstate session. */
export class AgentStateSaver extends BaseCheckpointSaver {
  readonly client: AgentStateClient;
  private readonly threads: Threads;
  private readonly reader: Reader;
  private readonly allowForks: boolean;

  constructor(client: AgentStateClient, opts: AgentStateSaverOptions = {}) {
    super(opts.serde);
    this.client = client;
    this.threads = new Threads(client, opts);
    this.reader = new Reader(client, this.serde);
    this.allowForks = opts.allowForks ?? false;
  }

  /** The agentstate namespace of the saver's thread sessions. */
  get namespace(): string {
    return this.threads.namespace;
  }

  /** The checkpoint the config names, or the thread's newest in its namespace; undefined when there is none. */
  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const thread = config.configurable?.thread_id;
    if (thread === undefined) return undefined;
    const ns: string = config.configurable?.checkpoint_ns ?? "";
    const id = getCheckpointId(config);
    try {
      return await this.threads.withSession(String(thread), false, async (sessionId) => {
        return id ? this.reader.byId(sessionId, ns, id) : this.reader.latest(sessionId, ns);
      });
    } catch (e) {
      if (e instanceof NotFound) return undefined;
      throw e;
    }
  }

  /**
   * The checkpoints the config and options select, newest first: of one
   * thread (or of every thread of the saver's namespace when thread_id is
   * absent), of one checkpoint namespace or all. With a limit and no filter
   * it reads pages of exactly the checkpoints it returns.
   */
  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options;
    let limit = options.limit;
    if (limit !== undefined && limit <= 0) return;
    const thread = config.configurable?.thread_id;
    const ns: string | undefined = config.configurable?.checkpoint_ns;
    const onlyId: string | undefined = config.configurable?.checkpoint_id || undefined;
    const beforeId: string | undefined = before?.configurable?.checkpoint_id || undefined;
    const sessionIds = thread !== undefined ? this.threads.one(String(thread)) : this.threads.all();
    for await (const sessionId of sessionIds) {
      if (onlyId !== undefined) {
        const t = await this.reader.byKey(sessionId, checkpointKey(ns ?? "", onlyId));
        if (t !== undefined && (beforeId === undefined || onlyId < beforeId) && this.reader.matches(t.metadata, filter)) {
          yield t;
          if (limit !== undefined && --limit <= 0) return;
        }
        continue;
      }
      const checkpoints = this.reader.checkpoints(sessionId, ns, {
        limit,
        beforeId,
        beforeNs: before?.configurable?.checkpoint_ns ?? (beforeId === undefined ? undefined : ""),
        filter,
      });
      for await (const t of checkpoints) {
        yield t;
        if (limit !== undefined && --limit <= 0) return;
      }
    }
  }

  /**
   * Stores a checkpoint as one atomic append: the checkpoint item with the
   * values of the channels in newVersions, one blob item per such channel
   * version pointing at it (a pointer stored before is kept), and, unless
   * forks are allowed, the parent's child marker, which makes a second child
   * of the same parent fail whole (CheckpointConflict).
   */
  async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    const thread = config.configurable?.thread_id;
    if (thread === undefined) {
      throw new Error('put: the config has no "thread_id" in its "configurable" property');
    }
    const ns: string = config.configurable?.checkpoint_ns ?? "";
    const parent: string | undefined = config.configurable?.checkpoint_id || undefined;
    const { channel_values: values, ...rest } = copyCheckpoint(checkpoint);
    const item: CheckpointItem = {
      thread: String(thread),
      ns,
      id: checkpoint.id,
      parent,
      checkpoint: await dump(this.serde, rest),
      metadata: await dump(this.serde, metadata),
    };
    const messages: NewMessage[] = [];
    const changed: NonNullable<CheckpointItem["values"]> = {};
    for (const [channel, version] of Object.entries(newVersions)) {
      const blob: BlobItem = {};
      if (Object.prototype.hasOwnProperty.call(values, channel)) {
        changed[channel] = [version, await dump(this.serde, (values as Record<string, unknown>)[channel])];
        blob.at = checkpoint.id;
      }
      messages.push(keyed(blobKey(ns, channel, version), KIND_BLOB, blob, true));
    }
    if (Object.keys(changed).length > 0) item.values = changed;
    // The checkpoint first: it is always stored (or the append fails), so a
    // retried append is recognised by its id.
    messages.unshift(keyed(checkpointKey(ns, checkpoint.id), checkpointKind(ns), item, false));
    const marker = parent !== undefined && !this.allowForks ? childKey(ns, parent) : undefined;
    if (marker !== undefined) messages.push(keyed(marker, KIND_CHILD, { child: checkpoint.id }, false));
    const stored = { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
    await this.threads.withSession(String(thread), true, async (sessionId) => {
      try {
        await this.client.session.append({ sessionId, messages });
      } catch (e) {
        if (!(e instanceof AlreadyExists) || marker === undefined) throw e;
        // Which key was taken: the marker names the parent's stored child.
        let child: string | undefined;
        try {
          const m = (await this.client.session.getItem({ sessionId, itemKey: marker })).message;
          if (m !== undefined) child = parse<{ child: string }>(m.content, marker).child;
        } catch (ge) {
          if (!(ge instanceof NotFound)) throw ge;
        }
        // The marker names this very checkpoint: an earlier attempt of this put went in.
        if (child === checkpoint.id) return;
        if (child !== undefined) throw new CheckpointConflict(String(thread), ns, parent!, checkpoint.id, child, e);
        throw e;
      }
    });
    return stored;
  }

  /**
   * Stores a task's pending writes to a checkpoint as one atomic append.
   * Ordinary writes are kept once per (task, index): a retried or partly
   * stored batch stores only what is missing. Special writes (error,
   * interrupt, resume, scheduled) replace the task's earlier one.
   */
  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const thread = config.configurable?.thread_id;
    const checkpointId: string | undefined = config.configurable?.checkpoint_id;
    if (thread === undefined) {
      throw new Error('putWrites: the config has no "thread_id" in its "configurable" property');
    }
    if (!checkpointId) {
      throw new Error('putWrites: the config has no "checkpoint_id" in its "configurable" property');
    }
    if (writes.length === 0) return;
    const ns: string = config.configurable?.checkpoint_ns ?? "";
    const messages: NewMessage[] = [];
    for (const [i, [channel, value]] of writes.entries()) {
      const idx = WRITES_IDX_MAP[channel] ?? i;
      const item: WriteItem = { task: taskId, channel, path: taskPath ?? "", idx, value: await dump(this.serde, value) };
      const messageId = newUlid();
      // A special write's key is unique (its message id): the newest wins on read.
      const key = idx >= 0 ? writeKey(ns, checkpointId, taskId, idx) : `${writeKey(ns, checkpointId, taskId, idx)}:${messageId}`;
      messages.push({ ...keyed(key, KIND_WRITE, item, idx >= 0), messageId });
    }
    await this.threads.withSession(String(thread), true, (sessionId) =>
      this.client.session.append({ sessionId, messages }),
    );
  }

  /** Deletes the thread's session: every checkpoint, value and write of every namespace, at once. */
  async deleteThread(threadId: string): Promise<void> {
    await this.threads.delete(String(threadId));
  }
}

function keyed(itemKey: string, kind: string, content: unknown, keepStored: boolean): NewMessage {
  return {
    role: sessionv1.Role.SYSTEM,
    content: JSON.stringify(content),
    messageId: newUlid(),
    itemKey,
    kind,
    onKeyConflict: keepStored ? sessionv1.KeyConflict.KEEP_STORED : sessionv1.KeyConflict.UNSPECIFIED,
  };
}
