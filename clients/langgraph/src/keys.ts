// The item keys and kinds of a thread's session. Every item of a thread
// lives in one session; its key says what it is and where it belongs, so a
// read names exactly what it needs (GetItem) or a key prefix whose items are
// exactly what it returns (ListItems).
//
//   c:<ns>:<checkpoint id>             kind "checkpoint[:<ns>]"  the checkpoint, metadata, parent, the values its put changed
//   b:<ns>:<channel>:<version>         kind "blob"        the checkpoint holding one channel's value at one version
//   w:<ns>:<checkpoint id>:<task>:<i>  kind "write"       one pending write; kept once (KEEP_STORED)
//   w:<ns>:<checkpoint id>:<task>:<i>:<message id>        a special write (error, interrupt...), last one wins
//   p:<ns>:<parent id>                 kind "child"       the one child of a parent: refuses a second (ownership)
//
// Each part is escaped so that ":" only ever separates parts, which keeps
// one namespace's prefix from matching another's ("a" vs "a:b"). A part too
// long for the node's 256-byte key limit is replaced by its SHA-256; what
// the reader needs of it (the namespace, the task id) is in the item itself.
import { createHash } from "node:crypto";

const KIND_CHECKPOINT = "checkpoint";
export const KIND_BLOB = "blob";
export const KIND_WRITE = "write";
export const KIND_CHILD = "child";

// Parts longer than this (escaped) are hashed; five parts of at most 48
// bytes and their separators stay under the node's 256-byte key limit.
const MAX_PART = 48;

/** One key part: "%", ":" and "#" escaped, or "#" and the SHA-256 of a long part. */
export function part(s: string): string {
  const esc = s.replace(/[%:#]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
  if (Buffer.byteLength(esc) <= MAX_PART) return esc;
  return "#" + createHash("sha256").update(s).digest("base64url");
}

/** The key prefix of every checkpoint of a thread, of all namespaces. */
export const CHECKPOINTS = "c:";

/**
 * The kind of a namespace's checkpoints. The node reads a kind through an
 * index in sequence order, so the newest checkpoints of a namespace are one
 * index probe however long the thread (a key prefix is an index range in
 * key order, which would read all of them to find the newest). Kinds are at
 * most 64 bytes of printable ASCII: a namespace that is not, or is too
 * long, or holds "#", is named by "#" and its SHA-256.
 */
export function checkpointKind(ns: string): string {
  if (ns === "") return KIND_CHECKPOINT;
  const raw = /^[\x21-\x7e]{1,53}$/.test(ns) && !ns.includes("#");
  return `${KIND_CHECKPOINT}:${raw ? ns : "#" + createHash("sha256").update(ns).digest("base64url")}`;
}
export const checkpointKey = (ns: string, id: string) => `c:${part(ns)}:${part(id)}`;
export const blobKey = (ns: string, channel: string, version: string | number) =>
  `b:${part(ns)}:${part(channel)}:${part(String(version))}`;
export const writesPrefix = (ns: string, checkpointId: string) => `w:${part(ns)}:${part(checkpointId)}:`;
export const writeKey = (ns: string, checkpointId: string, taskId: string, idx: number) =>
  `${writesPrefix(ns, checkpointId)}${part(taskId)}:${idx}`;
export const childKey = (ns: string, parentId: string) => `p:${part(ns)}:${part(parentId)}`;
