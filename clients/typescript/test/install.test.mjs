// The package as a user installs it (docs/CLIENTS.md, "TypeScript"): packed
// from this tree, installed into an empty project from the npm cache, then
// the section's example runs against a live node, as written.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Node } from "./node.mjs";

const PKG = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const REPO = resolve(PKG, "..", "..");

function example() {
  const doc = readFileSync(join(REPO, "docs", "CLIENTS.md"), "utf8");
  const m = /```ts\n([\s\S]*?)```/.exec(doc.slice(doc.indexOf("## TypeScript")));
  if (!m) throw new Error('docs/CLIENTS.md has no ts block under "## TypeScript"');
  return m[1];
}

let node;
let dir;
before(async () => {
  node = await Node.start();
  dir = mkdtempSync(join(tmpdir(), "agentstate-ts-install-"));
});
after(async () => {
  await node?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("the documented example runs from the packed, installed package", () => {
  const npm = (args, cwd) => execFileSync("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], { cwd, encoding: "utf8" });
  // dist/ is built by `npm ci` (the prepare script), which ran before the tests.
  const tgz = npm(["pack", "--ignore-scripts", "--pack-destination", dir], PKG).trim().split("\n").pop();
  const project = join(dir, "project");
  execFileSync("mkdir", [project]);
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "uses-agentstate", private: true, type: "module" }));
  npm(["install", "--prefer-offline", join(dir, tgz)], project);
  // The example is plain JavaScript as well as TypeScript; only the address differs.
  const code = example().replace("127.0.0.1:7420", node.grpcAddr);
  assert.notEqual(code, example(), "the example names no address to replace");
  writeFileSync(join(project, "example.mjs"), code);
  const out = execFileSync("node", ["example.mjs"], { cwd: project, encoding: "utf8", timeout: 30_000 });
  assert.equal(out, "[ 0n, 1n ]\n0n What changed?\n1n Two files.\nno such session\n");
});
