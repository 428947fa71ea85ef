// LangGraph's own checkpointer validation suite
// (@langchain/langgraph-checkpoint-validation), unchanged, against a live
// node over gRPC. The suite is written for Vitest (its cases are Vitest
// globals), so this test runs Vitest on validation/validation.spec.mjs in a
// child process and asserts on its JSON report: every one of the suite's
// 726 cases ran and passed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Node } from "../../typescript/test/node.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const VITEST = join(HERE, "..", "node_modules", "vitest", "vitest.mjs");
const CASES = 726;

test(`LangGraph's checkpointer validation suite: ${CASES} of ${CASES} over gRPC`, async () => {
  const node = await Node.start();
  try {
    const report = join(node.dir, "vitest.json");
    const child = spawn(
      process.execPath,
      [VITEST, "run", "--config", "vitest.config.mjs", "--reporter=json", `--outputFile.json=${report}`],
      { cwd: join(HERE, "validation"), env: { ...process.env, AGENTSTATE_ADDR: node.grpcAddr }, stdio: ["ignore", "inherit", "inherit"] },
    );
    const [code] = await once(child, "exit");
    const r = JSON.parse(readFileSync(report, "utf8"));
    const failed = r.testResults
      .flatMap((f) => f.assertionResults)
      .filter((a) => a.status !== "passed")
      .map((a) => `${a.status}: ${a.fullName}\n  ${(a.failureMessages ?? []).join("\n  ").slice(0, 600)}`);
    assert.deepEqual(failed, [], `cases not passed:\n${failed.join("\n")}`);
    assert.equal(r.numTotalTests, CASES);
    assert.equal(r.numPassedTests, CASES);
    assert.equal(code, 0);
  } finally {
    await node.stop();
  }
});
