// What a thread's items hold: JSON text (a message's content is UTF-8),
// with each value in the saver's serializer's typed form. A "json" value
// stays readable text; bytes that are not UTF-8 travel as base64.
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";

/** A serialized value: its serializer type and its text or base64 bytes. */
export type Typed = [type: string, text: string] | [type: string, text: null, base64: string];

const utf8 = new TextDecoder("utf-8", { fatal: true });

export async function dump(serde: SerializerProtocol, value: unknown): Promise<Typed> {
  const [type, bytes] = await serde.dumpsTyped(value);
  try {
    return [type, utf8.decode(bytes)];
  } catch {
    return [type, null, Buffer.from(bytes).toString("base64")];
  }
}

export function load(serde: SerializerProtocol, t: Typed): Promise<any> {
  return t[1] !== null ? serde.loadsTyped(t[0], t[1]) : serde.loadsTyped(t[0], new Uint8Array(Buffer.from(t[2], "base64")));
}

/**
 * A checkpoint item: the checkpoint without its channel values, its
 * metadata and parent, and the values of the channels this put changed
 * (newVersions), each with its version.
 */
export interface CheckpointItem {
  thread: string;
  ns: string;
  id: string;
  parent?: string;
  checkpoint: Typed;
  metadata: Typed;
  values?: Record<string, [version: string | number, value: Typed]>;
}

/**
 * A blob item: where one channel's value at one version is, the id of the
 * checkpoint (same namespace) whose item holds it; none when the put that
 * made the version emptied the channel.
 */
export interface BlobItem {
  at?: string;
}

/** A pending-write item. */
export interface WriteItem {
  task: string;
  channel: string;
  path: string;
  idx: number;
  value: Typed;
}

export function parse<T>(content: string, key: string): T {
  try {
    return JSON.parse(content) as T;
  } catch (e) {
    throw new Error(`item ${JSON.stringify(key)} is not a checkpointer item (${String(e)})`);
  }
}
