// The validation suite declares its cases with Vitest's globals.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globals: true,
    include: ["validation.spec.mjs"],
    // One node, one worker: the cases share the node's actors.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
