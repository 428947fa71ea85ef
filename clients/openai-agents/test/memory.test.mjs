// The in-memory session's behaviour, restated in our own words and checked
// against both that session and ours: the SDK's MemorySession
// (openai-agents-js, packages/agents-core/src/memory/memorySession.ts, as
// published in @openai/agents-core 0.20.0: dist/memory/memorySession.mjs) is the
// reference implementation of the Session interface and the SDK ships no
// shared test suite. Each case runs on a MemorySession and on an
// AgentStateSession over a live node, so a case that misstates the SDK
// fails on the first.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { MemorySession, UserError } from "@openai/agents-core";
import { AgentStateSession } from "../dist/index.js";
import { liveNode, user } from "./live.mjs";

const live = liveNode();
const reply = (text) => ({ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] });
const texts = (items) => items.map((i) => (typeof i.content === "string" ? i.content : i.content[0].text));

const kinds = {
  memory: (sessionId) => new MemorySession({ sessionId }),
  agentstate: (sessionId) => new AgentStateSession(live.client, { sessionId }),
};

for (const [kind, open] of Object.entries(kinds)) {
  describe(kind, () => {
    let n = 0;
    const fresh = () => open(`${kind}-${++n}-${process.pid}`);

    test("a session answers the id it was given, and makes one when given none", async () => {
      assert.equal(await open("given-id").getSessionId(), "given-id");
      const s = kind === "memory" ? new MemorySession() : new AgentStateSession(live.client);
      const id = await s.getSessionId();
      assert.ok(id.length > 0);
      assert.equal(await s.getSessionId(), id);
    });

    test("a new session has no items, and nothing to pop", async () => {
      const s = fresh();
      assert.deepEqual(await s.getItems(), []);
      assert.equal(await s.popItem(), undefined);
    });

    test("items come back in the order they were added, across calls", async () => {
      const s = fresh();
      await s.addItems([user("a"), reply("b")]);
      await s.addItems([]);
      await s.addItems([user("c")]);
      assert.deepEqual(await s.getItems(), [user("a"), reply("b"), user("c")]);
    });

    test("a limit returns the newest items, oldest first; none for a limit of zero or less", async () => {
      const s = fresh();
      await s.addItems(["1", "2", "3", "4", "5"].map(user));
      assert.deepEqual(texts(await s.getItems(2)), ["4", "5"]);
      assert.deepEqual(texts(await s.getItems(10)), ["1", "2", "3", "4", "5"]);
      assert.deepEqual(await s.getItems(0), []);
      assert.deepEqual(await s.getItems(-1), []);
    });

    test("a pop removes and returns the newest item, until none is left", async () => {
      const s = fresh();
      await s.addItems([user("a"), user("b")]);
      assert.deepEqual(await s.popItem(), user("b"));
      assert.deepEqual(texts(await s.getItems()), ["a"]);
      assert.deepEqual(await s.popItem(), user("a"));
      assert.equal(await s.popItem(), undefined);
      await s.addItems([user("c")]);
      assert.deepEqual(texts(await s.getItems()), ["c"]);
    });

    test("what a read returns is a copy: changing it changes nothing stored", async () => {
      const s = fresh();
      await s.addItems([user("a")]);
      const got = await s.getItems();
      got[0].content = "changed";
      got.push(user("extra"));
      assert.deepEqual(await s.getItems(), [user("a")]);
    });

    test("clearing removes every item; the session goes on empty, under the same id", async () => {
      const s = fresh();
      const id = await s.getSessionId();
      await s.addItems([user("a"), user("b")]);
      await s.clearSession();
      assert.deepEqual(await s.getItems(), []);
      assert.equal(await s.getSessionId(), id);
      await s.addItems([user("c")]);
      assert.deepEqual(texts(await s.getItems()), ["c"]);
    });

    test("an append transaction appends; repeating its operation id changes nothing", async () => {
      const s = fresh();
      await s.addItems([user("a")]);
      const tx = { operationId: "op-1", transaction: { type: "append_items", items: [reply("b"), user("c")] } };
      await s.applyHistoryTransaction(tx);
      await s.applyHistoryTransaction(structuredClone(tx));
      assert.deepEqual(texts(await s.getItems()), ["a", "b", "c"]);
    });

    test("an operation id used again for another transaction is refused, and changes nothing", async () => {
      const s = fresh();
      await s.applyHistoryTransaction({ operationId: "op", transaction: { type: "append_items", items: [user("a")] } });
      await assert.rejects(
        s.applyHistoryTransaction({ operationId: "op", transaction: { type: "append_items", items: [user("other")] } }),
        UserError,
      );
      assert.deepEqual(texts(await s.getItems()), ["a"]);
    });

    test("a suffix replacement replaces the expected newest items, once per operation id", async () => {
      const s = fresh();
      await s.addItems([user("a"), reply("draft"), user("tool?")]);
      const tx = {
        operationId: "op-r",
        transaction: { type: "replace_suffix", expectedSuffix: [reply("draft"), user("tool?")], replacement: [reply("final")] },
      };
      await s.applyHistoryTransaction(tx);
      assert.deepEqual(texts(await s.getItems()), ["a", "final"]);
      await s.applyHistoryTransaction(structuredClone(tx));
      assert.deepEqual(texts(await s.getItems()), ["a", "final"]);
    });

    test("a suffix replacement whose expected suffix is not the history's is refused, and changes nothing", async () => {
      const s = fresh();
      await s.addItems([user("a"), user("b")]);
      for (const expectedSuffix of [[user("a")], [user("x"), user("a"), user("b")]]) {
        await assert.rejects(
          s.applyHistoryTransaction({ operationId: `op-${expectedSuffix.length}`, transaction: { type: "replace_suffix", expectedSuffix, replacement: [user("c")] } }),
          UserError,
        );
      }
      assert.deepEqual(texts(await s.getItems()), ["a", "b"]);
    });

    test("malformed transactions are refused before anything changes", async () => {
      const s = fresh();
      await s.addItems([user("a")]);
      const bad = [
        { operationId: "", transaction: { type: "append_items", items: [user("b")] } },
        { operationId: "op", transaction: { type: "delete_all" } },
        { operationId: "op", transaction: { type: "append_items", items: [user("b")], extra: 1 } },
        { operationId: "op", transaction: { type: "replace_suffix", expectedSuffix: [] } },
      ];
      for (const args of bad) await assert.rejects(s.applyHistoryTransaction(args), UserError, JSON.stringify(args));
      assert.deepEqual(texts(await s.getItems()), ["a"]);
    });

    test("clearing forgets applied operation ids", async () => {
      const s = fresh();
      const tx = { operationId: "op-c", transaction: { type: "append_items", items: [user("a")] } };
      await s.applyHistoryTransaction(tx);
      await s.clearSession();
      await s.applyHistoryTransaction(tx);
      assert.deepEqual(texts(await s.getItems()), ["a"]);
    });
  });
}

// What only a stored session shows: another session object (another
// process) with the same id sees the same items.
test("agentstate: two session objects with one id share their items", async () => {
  const a = new AgentStateSession(live.client, { sessionId: "shared" });
  const b = new AgentStateSession(live.client, { sessionId: "shared" });
  await a.addItems([user("from a")]);
  await b.addItems([user("from b")]);
  assert.deepEqual(texts(await a.getItems()), ["from a", "from b"]);
  assert.deepEqual(await b.popItem(), user("from b"));
  assert.deepEqual(texts(await a.getItems()), ["from a"]);
  await b.clearSession();
  assert.deepEqual(await a.getItems(), []);
  await a.addItems([user("after clear")]);
  assert.deepEqual(texts(await b.getItems()), ["after clear"]);
});

test("agentstate: a compaction replaces the whole history at once", async () => {
  const s = new AgentStateSession(live.client, { sessionId: "compaction" });
  await s.addItems(["1", "2", "3"].map(user));
  await s.replaceHistoryWithCompaction([{ type: "compaction", encrypted_content: "summary" }, user("3")]);
  assert.deepEqual(await s.getItems(), [{ type: "compaction", encrypted_content: "summary" }, user("3")]);
});

test("agentstate: items that are not JSON are refused before anything is stored", async () => {
  const s = new AgentStateSession(live.client, { sessionId: "not-json" });
  await assert.rejects(s.addItems([user("ok"), { type: "message", role: "user", content: new Uint8Array([1]) }]), UserError);
  assert.deepEqual(await s.getItems(), []);
});
