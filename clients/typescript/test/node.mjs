// Starts a real node (bin/node serve) for the tests: a temporary SQLite file
// and ports the node chooses (127.0.0.1:0), read from its "serving" log line,
// so parallel runs cannot collide on a port. The binary is $AGENTSTATE_NODE,
// else bin/node at the repository's root (`make build`), as the Python
// client's tests do.
import { spawn } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { once } from "node:events";
import { createInterface } from "node:readline";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const START_TIMEOUT_MS = 20_000;

export function nodeBinary() {
  const path = process.env.AGENTSTATE_NODE || join(REPO, "bin", "node");
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`no node binary at ${path}: run \`make build\` or set AGENTSTATE_NODE`);
  }
  return path;
}

/** A running node; stop() drains it (SIGTERM) and removes its files. */
export class Node {
  /**
   * dir and grpcAddr restart a node stopped with keep on its database and address.
   * @param {{token?: string, tlsCert?: string, tlsKey?: string, dir?: string, grpcAddr?: string}} opts
   */
  static async start(opts = {}) {
    const dir = opts.dir ?? mkdtempSync(join(tmpdir(), "agentstate-ts-"));
    const args = ["serve", "--data", join(dir, "agentstate.db"), "--grpc-addr", opts.grpcAddr ?? "127.0.0.1:0",
      "--http-addr", "127.0.0.1:0", "--log-format", "json"];
    if (opts.token !== undefined) {
      const tok = join(dir, "token");
      writeFileSync(tok, opts.token + "\n", { mode: 0o600 });
      args.push("--auth-token-file", tok);
    }
    if (opts.tlsCert !== undefined) args.push("--tls-cert", opts.tlsCert, "--tls-key", opts.tlsKey);
    const proc = spawn(nodeBinary(), args, { stdio: ["ignore", "ignore", "pipe"] });
    const n = new Node(dir, proc);
    try {
      await n.#ready();
    } catch (e) {
      await n.stop();
      throw e;
    }
    return n;
  }

  log = [];
  grpcAddr = "";
  httpAddr = "";
  #serving;

  constructor(dir, proc) {
    this.dir = dir;
    this.proc = proc;
    this.exited = once(proc, "exit");
    this.#serving = new Promise((resolve, reject) => {
      // Read every line, or the node blocks on a full pipe.
      createInterface({ input: proc.stderr }).on("line", (line) => {
        this.log.push(line);
        let rec;
        try {
          rec = JSON.parse(line);
        } catch {
          return;
        }
        if (rec.msg === "serving") {
          this.grpcAddr = rec.grpc_addr;
          this.httpAddr = rec.http_addr;
          resolve();
        }
      });
      proc.on("exit", (code) => reject(new Error(`node exited with ${code}:\n${this.log.join("\n")}`)));
    });
  }

  async #ready() {
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`node did not log its addresses:\n${this.log.join("\n")}`)), START_TIMEOUT_MS);
    });
    try {
      await Promise.race([this.#serving, timeout]);
      // Polling /readyz with a deadline, not synchronization.
      for (;;) {
        try {
          const r = await fetch(`http://${this.httpAddr}/readyz`);
          if (r.status === 200) return;
        } catch {
          // not listening yet
        }
        await Promise.race([new Promise((r) => setTimeout(r, 50)), timeout]);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /** Drains the node (SIGTERM), or kills it (SIGKILL, a crash); keep leaves its files. */
  async stop({ keep = false, kill = false } = {}) {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill(kill ? "SIGKILL" : "SIGTERM");
      await this.exited;
    }
    if (!keep) rmSync(this.dir, { recursive: true, force: true });
  }
}
