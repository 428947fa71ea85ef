// How an Agents SDK item is one agentstate message: its content is the
// item's JSON, its kind "item", its role the item's (a tool's output is a
// tool message, any other non-message item the assistant's). Items written
// by a history transaction carry ids made from the operation id: message
// id and item key "op-<hash>-<index>", and the transaction's digest in
// metadata_json, so a retried transaction is the same append and the node
// stores it once.
import { createHash } from "node:crypto";
import { UserError } from "@openai/agents-core";
import type { AgentInputItem } from "@openai/agents-core";
import { Role, newUlid } from "@agentstate/client";
import type { sessionv1 } from "@agentstate/client";

/** The kind of every message this package writes. */
export const ITEM_KIND = "item";

const FORMAT = "openai_agents_item";

/**
 * The item's JSON with object keys sorted, so that equal items (in the
 * SDK's sense: structurally equal) have equal text. Values JSON cannot
 * carry faithfully (binary data, functions, class instances, cycles) are
 * refused before anything is written, as the SDK allows.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(canonical(value, new Set()));
}

function canonical(v: unknown, seen: Set<object>): unknown {
  if (v === null || typeof v === "string" || typeof v === "boolean") return v;
  if (typeof v === "number") {
    if (!Number.isFinite(v)) throw new UserError("Session items must be JSON: a number is not finite.");
    return v;
  }
  if (typeof v !== "object") throw new UserError(`Session items must be JSON: a value is a ${typeof v}.`);
  if (seen.has(v)) throw new UserError("Session items must be JSON: a value is cyclic.");
  seen.add(v);
  try {
    if (Array.isArray(v)) return v.map((x) => (x === undefined ? null : canonical(x, seen)));
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) {
      throw new UserError("Session items must be JSON: a value is not a plain object (binary data is not stored).");
    }
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) {
      const x = (v as Record<string, unknown>)[k];
      if (x !== undefined) out[k] = canonical(x, seen);
    }
    return out;
  } finally {
    seen.delete(v);
  }
}

function roleOf(item: AgentInputItem): Role {
  const r = (item as { role?: unknown }).role;
  if (r === "user") return Role.USER;
  if (r === "system" || r === "developer") return Role.SYSTEM;
  const t = (item as { type?: unknown }).type;
  if (typeof t === "string" && (t.endsWith("_result") || t.endsWith("_output"))) return Role.TOOL;
  return Role.ASSISTANT;
}

/** A NewMessage as the generated client takes it. */
export interface ItemMessage {
  role: Role;
  content: string;
  metadataJson: string;
  messageId: string;
  itemKey: string;
  kind: string;
}

/**
 * The message that stores item. A transaction's item has its id (also its
 * item key, so GetItem finds it) and the digest; any other gets a new ULID,
 * made before the first attempt so the client's retries store it once.
 */
export function itemMessage(item: AgentInputItem, id?: string, digest?: string): ItemMessage {
  const meta: Record<string, unknown> = { [FORMAT]: 1 };
  if (digest !== undefined) meta.op = digest;
  return {
    role: roleOf(item),
    content: canonicalJson(item),
    metadataJson: JSON.stringify(meta),
    messageId: id ?? newUlid(),
    itemKey: id ?? "",
    kind: ITEM_KIND,
  };
}

/**
 * The item a message stores. A message another client wrote (without this
 * package's metadata) reads as a message item of its role and text.
 */
export function itemOf(m: sessionv1.Message): AgentInputItem {
  if (!isOurs(m)) {
    const role = m.role === Role.USER ? "user" : m.role === Role.SYSTEM ? "system" : "assistant";
    if (role === "assistant") {
      return { type: "message", role, status: "completed", content: [{ type: "output_text", text: m.content }] } as AgentInputItem;
    }
    return { type: "message", role, content: m.content } as AgentInputItem;
  }
  return JSON.parse(m.content) as AgentInputItem;
}

function metaOf(m: sessionv1.Message): Record<string, unknown> {
  try {
    const v = JSON.parse(m.metadataJson) as unknown;
    return v !== null && typeof v === "object" ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function isOurs(m: sessionv1.Message): boolean {
  return metaOf(m)[FORMAT] !== undefined;
}

/** The transaction digest a message of a history transaction carries, if any. */
export function digestOf(m: sessionv1.Message): string | undefined {
  const op = metaOf(m).op;
  return typeof op === "string" ? op : undefined;
}

function sha256(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

/** The key prefix of an operation's items: message ids are printable ASCII of at most 128 bytes, operation ids anything. */
export function opPrefix(operationId: string): string {
  return `op-${sha256(operationId).slice(0, 40)}-`;
}

/** A transaction's digest: equal transactions (as the SDK compares them) have equal digests. */
export function digest(transaction: unknown): string {
  return sha256(canonicalJson(transaction));
}
