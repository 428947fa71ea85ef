// A node that wants a bearer token, and one that serves TLS (with the
// certificates of docs/OPERATIONS.md's TLS recipe, made with openssl).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { NO_RETRY, Unauthenticated, Unavailable, createClient, newUlid } from "../dist/index.js";
import { Node } from "./node.mjs";

const TOKEN = "s3cret-token-for-ts-tests";
const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

describe("a node with --auth-token-file", () => {
  let node;
  before(async () => {
    node = await Node.start({ token: TOKEN });
  });
  after(async () => {
    await node?.stop();
  });

  test("the right token works for calls, the batched stream and tails", async () => {
    const c = createClient(node.grpcAddr, { token: TOKEN });
    try {
      const sid = (await c.createSession({ actorName: "tok" })).session.sessionId;
      const r = await c.append(sid, [{ role: "user", content: "with token" }]);
      assert.equal(r.messages[0].sequence, 0n);
      for await (const ev of c.tailSession(sid)) {
        assert.equal(ev.event.value.content, "with token");
        break;
      }
      assert.equal((await c.session.get({ sessionId: sid })).session.messageCount, 1n);
    } finally {
      await c.close();
    }
  });

  test("a wrong or missing token is Unauthenticated, for calls, the batched stream and tails", async () => {
    for (const token of ["wrong", undefined]) {
      const c = createClient(node.grpcAddr, { token });
      try {
        await assert.rejects(c.session.get({ sessionId: newUlid() }), Unauthenticated, `token=${token}`);
        // The batched stream is refused as a whole; the refusal reaches the append.
        await assert.rejects(c.append(newUlid(), [{ role: "user", content: "x" }]), Unauthenticated);
        await assert.rejects(c.createSession({ actorName: "x" }), Unauthenticated);
        await assert.rejects(async () => {
          for await (const _ of c.tailChanges()) break;
        }, Unauthenticated);
      } finally {
        await c.close();
      }
    }
  });
});

// The first sh block after "A TLS recipe" in docs/OPERATIONS.md, as tests/e2e runs it.
function tlsRecipe() {
  const doc = readFileSync(join(REPO, "docs", "OPERATIONS.md"), "utf8");
  const rest = doc.slice(doc.indexOf("A TLS recipe"));
  const m = /```sh\n([\s\S]*?)```/.exec(rest);
  if (!m) throw new Error("docs/OPERATIONS.md has no TLS recipe");
  return m[1];
}

function haveOpenssl() {
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    if (process.env.CI) throw new Error("openssl is not installed; the TLS test needs it");
    return false;
  }
}

describe("a node serving TLS", { skip: !haveOpenssl() && "openssl is not installed" }, () => {
  let node;
  let dir;
  let ca;
  let otherCa;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "agentstate-ts-tls-"));
    // Two runs of the recipe: the node's CA, and another that did not sign it.
    for (const sub of ["a", "b"]) {
      mkdirSync(join(dir, sub));
      execFileSync("bash", ["-e", "-c", tlsRecipe()], { cwd: join(dir, sub), stdio: "ignore" });
    }
    ca = readFileSync(join(dir, "a", "ca.pem"));
    otherCa = readFileSync(join(dir, "b", "ca.pem"));
    node = await Node.start({ token: TOKEN, tlsCert: join(dir, "a", "node1.pem"), tlsKey: join(dir, "a", "node1-key.pem") });
  });
  after(async () => {
    await node?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("with its CA and the token: calls, the batched stream and tails work", async () => {
    const c = createClient(node.grpcAddr, { token: TOKEN, tls: { ca } });
    try {
      const sid = (await c.createSession({ actorName: "tls" })).session.sessionId;
      const r = await Promise.all([0, 1, 2, 3].map((i) => c.append(sid, [{ role: "user", content: `over TLS ${i}` }])));
      assert.deepEqual(r.map((x) => x.messages[0].sequence).sort(), [0n, 1n, 2n, 3n]);
      let n = 0;
      for await (const ev of c.tailSession(sid)) {
        assert.equal(ev.event.case, "message");
        if (++n === 4) break;
      }
    } finally {
      await c.close();
    }
  });

  test("by name: localhost is in the certificate, or named with serverName", async () => {
    const port = node.grpcAddr.slice(node.grpcAddr.lastIndexOf(":"));
    for (const [addr, tls] of [[`localhost${port}`, { ca }], [node.grpcAddr, { ca, serverName: "node1.example.com" }]]) {
      const c = createClient(addr, { token: TOKEN, tls });
      try {
        await c.createSession({ actorName: "named" });
      } finally {
        await c.close();
      }
    }
  });

  test("an untrusted certificate or plaintext fails Unavailable, and nothing is sent", async () => {
    for (const tls of [{ ca: otherCa }, undefined, { ca, serverName: "not-in-the-cert.example" }]) {
      const c = createClient(node.grpcAddr, { token: TOKEN, tls, retry: NO_RETRY });
      try {
        await assert.rejects(c.session.list({}), Unavailable, JSON.stringify(tls?.serverName ?? (tls ? "other CA" : "plaintext")));
      } finally {
        await c.close();
      }
    }
  });

  test("TLS without the token is Unauthenticated", async () => {
    const c = createClient(node.grpcAddr, { tls: { ca } });
    try {
      await assert.rejects(c.session.list({}), Unauthenticated);
    } finally {
      await c.close();
    }
  });
});
