/**
 * Tests run inside workerd through the Cloudflare vitest plugin: the real worker, the real region
 * Durable Objects (SQLite storage, isolated per test file), and fake origin nodes behind
 * miniflare's outbound service, so every `fetch` the worker makes to a node lands in
 * test/fixtures/fake-node.ts.
 */
import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { edgeCeilingPerMinute } from "./src/config/edge-ceiling.ts";
import { handleFakeNode } from "./test/fixtures/fake-node.ts";
import {
  TEST_ADMIN_TOKEN,
  TEST_CONFIG,
  TEST_INTERNAL_SECRET,
  TEST_INTERNAL_SECRET_PREVIOUS,
  TEST_NODE_TOKEN,
  TEST_ORIGIN_TOKEN,
} from "./test/fixtures/config.ts";

export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./wrangler.toml" },
      miniflare: {
        bindings: {
          // A plain JSON value, exactly as wrangler passes a TOML table var.
          WARMPATH_CONFIG: TEST_CONFIG as never,
          NODE_TOKEN_TEST: TEST_NODE_TOKEN,
          ADMIN_TOKEN_TEST: TEST_ADMIN_TOKEN,
          ORIGIN_TOKEN_TEST: TEST_ORIGIN_TOKEN,
          // The internal boundary's secrets, mid-rotation (test/region/internal-auth.test.ts).
          INTERNAL_SECRET: TEST_INTERNAL_SECRET,
          INTERNAL_SECRET_PREVIOUS: TEST_INTERNAL_SECRET_PREVIOUS,
        },
        outboundService: (request) => handleFakeNode(request as unknown as Request) as never,
        // The edge ceiling as generated workers get it: derived from the configuration.
        ratelimits: { RATE_LIMITER: { namespace_id: "1001", simple: { limit: edgeCeilingPerMinute(TEST_CONFIG as never)!, period: 60 } } },
      },
    }),
  ],
  test: {
    include: ["test/**/*.test.ts"],
    // The worker logs a JSON line per request; show it only for failing tests.
    silent: "passed-only",
  },
});
