// ULIDs: the ids the node wants for sessions, messages, plan records and
// audit events (26 upper-case Crockford base32 characters, the first at most
// '7'). The client makes them before a write's first attempt, so that every
// retry of the write carries the same ids and the node answers it as the
// stored original instead of storing it twice.
import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const ULID_RE = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;

/** A new ULID: 48 bits of milliseconds, then 80 random bits. */
export function newUlid(now: number = Date.now()): string {
  let out = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[t % 32] + out;
    t = Math.floor(t / 32);
  }
  // 80 random bits = 16 characters of 5 bits: read them from 10 bytes.
  const r = randomBytes(10);
  let bits = 0n;
  for (const b of r) bits = (bits << 8n) | BigInt(b);
  let rand = "";
  for (let i = 0; i < 16; i++) {
    rand = ALPHABET[Number(bits & 31n)] + rand;
    bits >>= 5n;
  }
  return out + rand;
}

/** Whether s is a ULID as the node accepts it (upper case only). */
export function isUlid(s: string): boolean {
  return ULID_RE.test(s);
}
