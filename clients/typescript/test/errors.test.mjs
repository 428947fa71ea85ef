// Typed errors: the node's codes (from the status details, and from a
// batched append's outcome), OUTCOME_UNKNOWN, and the transport's own.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  AgentStateError, ErrorCode, FailedPrecondition, InvalidArgument, NO_RETRY, NotFound, OutcomeUnknown, PermissionDenied,
  SequenceMismatch, Unavailable, commonv1, createClient, forWrite, fromError, fromProto, newUlid,
} from "../dist/index.js";
import { Node } from "./node.mjs";

let node;
let c;
before(async () => {
  node = await Node.start();
  c = createClient(node.grpcAddr);
});
after(async () => {
  await c?.close();
  await node?.stop();
});

const modes = [true, false];

test("NOT_FOUND from a call and from the batched stream", async () => {
  const e = await c.session.get({ sessionId: newUlid() }).catch((x) => x);
  assert.ok(e instanceof NotFound, String(e));
  assert.equal(e.errorCode, ErrorCode.NOT_FOUND);
  assert.equal(e.code, Code.NotFound);
  assert.equal(e.codeFromDetails, true);
  for (const batchedAppends of modes) {
    const cl = createClient(node.grpcAddr, { batchedAppends });
    try {
      await assert.rejects(cl.append(newUlid(), [{ role: "user", content: "x" }]), NotFound, `batched=${batchedAppends}`);
    } finally {
      await cl.close();
    }
  }
});

test("FAILED_PRECONDITION: a conditional append with another expected next sequence stores nothing", async () => {
  for (const batchedAppends of modes) {
    const cl = createClient(node.grpcAddr, { batchedAppends });
    try {
      const sid = (await cl.createSession({ actorName: "cond" })).session.sessionId;
      await cl.append(sid, [{ role: "user", content: "one" }], { expectedNextSequence: 0n });
      const e = await cl.append(sid, [{ role: "user", content: "two" }], { expectedNextSequence: 0n }).catch((x) => x);
      assert.ok(e instanceof SequenceMismatch, `batched=${batchedAppends}: ${e}`);
      assert.ok(e instanceof FailedPrecondition);
      assert.equal(e.errorCode, ErrorCode.FAILED_PRECONDITION);
      assert.equal(e.expectedNextSequence, 0n);
      assert.equal(e.nextSequence, 1n);
      const { messages } = await cl.session.listMessages({ sessionId: sid });
      assert.deepEqual(messages.map((m) => m.content), ["one"]);
    } finally {
      await cl.close();
    }
  }
});

test("FAILED_PRECONDITION: an append to a closed session", async () => {
  const sid = (await c.createSession({ actorName: "closed" })).session.sessionId;
  await c.session.close({ sessionId: sid });
  const e = await c.append(sid, [{ role: "user", content: "late" }]).catch((x) => x);
  assert.ok(e instanceof FailedPrecondition && !(e instanceof SequenceMismatch), String(e));
});

test("INVALID_ARGUMENT: bad ids and roles", async () => {
  const e = await c.session.get({ sessionId: newUlid().toLowerCase() }).catch((x) => x);
  assert.ok(e instanceof InvalidArgument, String(e));
  assert.equal(e.codeFromDetails, true);
  await assert.rejects(c.createSession({ sessionId: "not-a-ulid", actorName: "x" }), InvalidArgument);
  const sid = (await c.createSession({ actorName: "bad" })).session.sessionId;
  await assert.rejects(c.append(sid, [{ role: "user", content: "x", messageId: "has space" }]), InvalidArgument);
  await assert.rejects(c.append(sid, [{ role: "user", content: "x", metadataJson: "[not json" }]), InvalidArgument);
  await assert.rejects(c.append(sid, [{ role: "robot", content: "x" }]), InvalidArgument);
  assert.equal((await c.session.get({ sessionId: sid })).session.messageCount, 0n);
});

test("OUTCOME_UNKNOWN: the node's (in the details) and a deadline's (without)", () => {
  const detail = create(commonv1.ErrorSchema, { code: ErrorCode.OUTCOME_UNKNOWN, message: "commit answer lost" });
  const fromNode = fromError(new ConnectError("x", Code.DeadlineExceeded, undefined, [{ desc: commonv1.ErrorSchema, value: detail }]));
  assert.ok(fromNode instanceof OutcomeUnknown);
  assert.equal(fromNode.codeFromDetails, true);
  assert.equal(fromNode.rawMessage, "commit answer lost");
  const deadline = fromError(new ConnectError("deadline", Code.DeadlineExceeded));
  assert.ok(deadline instanceof OutcomeUnknown);
  assert.equal(deadline.codeFromDetails, false);
  // A batched append's outcome carries the code itself.
  assert.ok(fromProto(detail) instanceof OutcomeUnknown);
  // The node's UNAVAILABLE promises nothing was stored; the transport's, for a write, does not.
  const nodeUnavailable = create(commonv1.ErrorSchema, { code: ErrorCode.UNAVAILABLE, message: "stopping" });
  assert.ok(forWrite(fromError(new ConnectError("x", Code.Unavailable, undefined, [{ desc: commonv1.ErrorSchema, value: nodeUnavailable }]))) instanceof Unavailable);
  assert.ok(forWrite(fromError(new ConnectError("reset", Code.Unavailable))) instanceof OutcomeUnknown);
  // Codes this client does not know are Internal, still AgentStateErrors.
  assert.ok(fromProto(create(commonv1.ErrorSchema, { code: 99, message: "?" })) instanceof AgentStateError);
});

test("PERMISSION_DENIED: from the node's detail and from the gRPC code alone", () => {
  const detail = create(commonv1.ErrorSchema, { code: commonv1.ErrorCode.PERMISSION_DENIED, message: "a reader may not append" });
  const fromNode = fromError(new ConnectError("x", Code.PermissionDenied, undefined, [{ desc: commonv1.ErrorSchema, value: detail }]));
  assert.ok(fromNode instanceof PermissionDenied, String(fromNode));
  assert.equal(fromNode.errorCode, ErrorCode.PERMISSION_DENIED);
  assert.ok(fromError(new ConnectError("denied", Code.PermissionDenied)) instanceof PermissionDenied);
  assert.ok(fromProto(detail) instanceof PermissionDenied);
});

test("a node that cannot be reached: reads Unavailable, writes OutcomeUnknown", async () => {
  const srv = createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const addr = `127.0.0.1:${srv.address().port}`;
  await new Promise((r) => srv.close(r));
  const cl = createClient(addr, { retry: NO_RETRY });
  try {
    await assert.rejects(cl.session.get({ sessionId: newUlid() }), Unavailable);
    const e = await cl.session.updateTokenUsage({ sessionId: newUlid(), inputTokens: 1n }).catch((x) => x);
    assert.ok(e instanceof OutcomeUnknown, String(e));
    // The batched stream never reached a node: its append was never sent.
    await assert.rejects(cl.append(newUlid(), [{ role: "user", content: "x" }]), Unavailable);
  } finally {
    await cl.close();
  }
});

test("retries: a read is retried after Unavailable; a write without a client id is not retried after OutcomeUnknown", async () => {
  // A server that takes each connection and drops it at once: every attempt
  // fails as a broken connection, and each attempt is one connection.
  let connections = 0;
  const srv = createServer((sock) => {
    connections++;
    sock.destroy();
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const cl = createClient(`127.0.0.1:${srv.address().port}`, { retry: { attempts: 3, initialBackoffMs: 1, maxBackoffMs: 2, multiplier: 2 } });
  try {
    await assert.rejects(cl.session.get({ sessionId: newUlid() }), Unavailable);
    assert.equal(connections, 3);
    connections = 0;
    await assert.rejects(cl.session.updateTokenUsage({ sessionId: newUlid(), inputTokens: 1n }), OutcomeUnknown);
    assert.equal(connections, 1);
    connections = 0;
    // A create carries its session id (createSession makes one): retried.
    await assert.rejects(cl.createSession({ actorName: "x" }), OutcomeUnknown);
    assert.equal(connections, 3);
  } finally {
    await cl.close();
    await new Promise((r) => srv.close(r));
  }
});
