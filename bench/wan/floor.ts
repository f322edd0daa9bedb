/**
 * Starts the runtime's floor (bench/wan/floor-worker.mts) in workerd as bench:wan runs warmpath:
 * the worker bundled as a deploy bundles it, its service binding to itself and its Durable Object
 * in the same process.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "smol-toml";
import { ROOT } from "../../scripts/system.ts";
import { startHost, type Host } from "./host.ts";

const WORKER = join(dirname(fileURLToPath(import.meta.url)), "floor-worker.mts");

/** The floor's modes (floor-worker.mts). */
export const FLOOR_MODES = ["proxy", "relay", "pull", "hops"] as const;
export type FloorMode = (typeof FLOOR_MODES)[number];

/** The floor worker, on wrangler.toml's compatibility date and flags (the runtime warmpath runs on). */
export function startFloor(): Promise<Host> {
  const root = parse(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as { compatibility_date: string; compatibility_flags?: string[] };
  return startHost((state) => {
    const config = join(state, "floor.wrangler.json");
    writeFileSync(
      config,
      JSON.stringify({
        name: "warmpath-floor",
        main: WORKER,
        compatibility_date: root.compatibility_date,
        compatibility_flags: root.compatibility_flags ?? [],
        services: [{ binding: "SELF", service: "warmpath-floor" }],
        durable_objects: { bindings: [{ name: "REGION", class_name: "FloorRegion" }] },
        migrations: [{ tag: "v1", new_sqlite_classes: ["FloorRegion"] }],
      }),
    );
    return ["--config", config, "--no-assets"];
  }, "/");
}
