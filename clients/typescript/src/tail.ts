// Live tails as async iterators: a session's messages (FeedService.TailSession)
// and the change feed (FeedService.TailChanges), each resumed across broken
// streams. The node delivers everything after the requested point exactly
// once and in order, so a tail keeps the point to resume from (the last
// message's sequence + 1, the last entry's position) and, when its stream
// breaks with Unavailable (a lost connection, a restart), reopens from it
// under the retry policy: nothing is delivered twice or skipped. An `ended`
// event is the node's last word and ends the iteration; the point is then
// where to resume elsewhere or after a restart.
import type { Client } from "@connectrpc/connect";
import type { ChangeEvent, ChangeFilter, SessionEvent } from "./gen/agentstate/feed/v1/feed_pb.js";
import { FeedService } from "./gen/agentstate/feed/v1/feed_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ChangeFilterSchema } from "./gen/agentstate/feed/v1/feed_pb.js";
import { AgentStateError, InvalidArgument, Unavailable, fromError } from "./errors.js";
import { backoffs, retryable, sleep } from "./retry.js";
import type { RetryPolicy } from "./retry.js";

/** What both tails share: the reopen loop, cancel, and the iteration's end. */
abstract class Tail<E> implements AsyncIterable<E> {
  private readonly ctl = new AbortController();
  /** Whether the node ended the tail (its last event was `ended`). */
  ended = false;

  constructor(
    protected readonly feed: Client<typeof FeedService>,
    private readonly policy: RetryPolicy,
  ) {}

  /** Ends the tail: the iteration stops without an error. Leaving a for-await loop does the same. */
  cancel(): void {
    this.ctl.abort();
  }

  protected abstract open(signal: AbortSignal): AsyncIterable<E>;
  /** Moves the resume point past ev; returns whether ev ends the tail. */
  protected abstract see(ev: E): boolean;

  async *[Symbol.asyncIterator](): AsyncGenerator<E> {
    let waits: Generator<number> | undefined;
    while (!this.ended && !this.ctl.signal.aborted) {
      const stream = new AbortController();
      const stop = () => stream.abort();
      this.ctl.signal.addEventListener("abort", stop, { once: true });
      let err: AgentStateError;
      try {
        for await (const ev of this.open(stream.signal)) {
          this.ended = this.see(ev);
          waits = undefined; // the stream works: a later failure starts its retries afresh
          yield ev;
          if (this.ended) return;
        }
        // The node ends a tail with an ended event; a stream that stops
        // without one was cut, like a failed one.
        err = new Unavailable("tail stream ended without an ended event");
      } catch (e) {
        if (this.ctl.signal.aborted) return;
        err = fromError(e);
      } finally {
        // Leaving the loop early (break, an exception) ends the stream.
        stream.abort();
        this.ctl.signal.removeEventListener("abort", stop);
      }
      waits ??= backoffs(this.policy);
      const w = waits.next();
      if (w.done || !retryable(err, false)) throw err;
      if (!(await sleep(w.value, this.ctl.signal))) return;
    }
  }
}

export interface TailSessionOptions {
  /** The first sequence to deliver (default 0: the whole session). */
  fromSequence?: bigint;
  /** Only messages committed after the tail starts. */
  fromNow?: boolean;
}

/** A session's events: its messages from a sequence, then each new one as it commits, `truncated`, `rewound` (the messages from its `fromSequence` on were replaced), and a last `ended`. */
export class SessionTail extends Tail<SessionEvent> {
  /** The sequence to resume from: the last message's + 1. */
  nextSequence: bigint;
  // Only the first stream starts "from now": a resumed one starts after
  // the last message seen, or it would skip those committed meanwhile.
  private fromNow: boolean;

  constructor(feed: Client<typeof FeedService>, policy: RetryPolicy, readonly sessionId: string, opts: TailSessionOptions = {}) {
    super(feed, policy);
    this.nextSequence = opts.fromSequence ?? 0n;
    if (this.nextSequence < 0n) throw new InvalidArgument(`fromSequence ${this.nextSequence} is negative`);
    this.fromNow = opts.fromNow ?? false;
  }

  protected open(signal: AbortSignal): AsyncIterable<SessionEvent> {
    return this.feed.tailSession({ sessionId: this.sessionId, fromSequence: this.nextSequence, fromNow: this.fromNow }, { signal });
  }

  protected see(ev: SessionEvent): boolean {
    switch (ev.event.case) {
      case "message":
        this.nextSequence = ev.event.value.sequence + 1n;
        this.fromNow = false;
        return false;
      case "truncated":
        if (ev.event.value.toSequence > this.nextSequence) this.nextSequence = ev.event.value.toSequence;
        this.fromNow = false;
        return false;
      case "rewound":
        // A replacement removed the messages from fromSequence on: their
        // replacements follow from there, and a resumed stream starts there.
        this.nextSequence = ev.event.value.fromSequence;
        this.fromNow = false;
        return false;
      case "ended":
        return true;
      default:
        return false;
    }
  }
}

export interface TailChangesOptions {
  /** Entries after this position (default 0: the whole trail); resume with the last entry's position. */
  afterPosition?: bigint;
  /** Only entries committed after the tail starts. */
  fromNow?: boolean;
  /** Which entries: event types (any of), session, plan, actor; empty matches all. */
  filter?: MessageInitShape<typeof ChangeFilterSchema> | ChangeFilter;
}

/** The change feed (the audit trail in commit order): entries after a position, then live; `pruned`; `ended` when the node stops. */
export class ChangesTail extends Tail<ChangeEvent> {
  /** The position to resume after: the last entry's. */
  afterPosition: bigint;
  private fromNow: boolean;

  constructor(feed: Client<typeof FeedService>, policy: RetryPolicy, private readonly opts: TailChangesOptions = {}) {
    super(feed, policy);
    this.afterPosition = opts.afterPosition ?? 0n;
    if (this.afterPosition < 0n) throw new InvalidArgument(`afterPosition ${this.afterPosition} is negative`);
    this.fromNow = opts.fromNow ?? false;
  }

  protected open(signal: AbortSignal): AsyncIterable<ChangeEvent> {
    return this.feed.tailChanges(
      { filter: this.opts.filter, afterPosition: this.afterPosition, fromNow: this.fromNow },
      { signal },
    );
  }

  protected see(ev: ChangeEvent): boolean {
    switch (ev.event.case) {
      case "entry":
        this.afterPosition = ev.event.value.position;
        this.fromNow = false;
        return false;
      case "pruned":
        if (ev.event.value.toPosition > this.afterPosition) this.afterPosition = ev.event.value.toPosition;
        this.fromNow = false;
        return false;
      case "ended":
        return true;
      default:
        return false;
    }
  }
}
