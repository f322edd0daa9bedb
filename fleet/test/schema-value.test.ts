/**
 * The value generated from a JSON schema (schema-value.ts), checked by a validator this repository
 * did not write: each schema is a zod schema turned into JSON schema by zod (`z.toJSONSchema`), and
 * the generated value must parse with the zod schema it came from.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { MAX_ITEMS, schemaValue } from "../schema-value.ts";

const STRUCTURED = { optional: true, defaultItems: 1 };

const Item = z.object({ sku: z.string().min(3).max(12), qty: z.int().min(2).max(5), price: z.number().positive().multipleOf(0.5) });
const Order = z
  .object({
    id: z.uuid(),
    placed: z.iso.datetime(),
    email: z.email(),
    status: z.enum(["ok", "failed"]),
    note: z.string().nullable(),
    coupon: z.string().optional(),
    items: z.array(Item).min(2).max(4),
    first: Item,
    tags: z.array(z.string()),
    nested: z.object({ deep: z.object({ flag: z.boolean(), none: z.null(), ratio: z.number().lt(1) }) }),
    either: z.union([z.literal(3), z.string()]),
  })
  .strict();

test("a value valid against the schema: every declared property, bounds, formats, enums, nullables, $refs", () => {
  const schema = z.toJSONSchema(Order, { reused: "ref" });
  assert.ok(JSON.stringify(schema).includes('"$ref"'), "the reused item schema is a $ref");
  const v = schemaValue(schema, 5, STRUCTURED) as Record<string, unknown>;
  assert.deepEqual(Order.parse(v), v);
  assert.deepEqual(Object.keys(v), Object.keys(Order.shape), "optional properties are filled too");
  assert.equal(typeof v.note, "string", "a nullable field gets its value, not null");
  assert.equal((v.tags as unknown[]).length, 1, "an array with no minItems gets one item");
  assert.equal((v.items as unknown[]).length, 2, "minItems");
  assert.deepEqual(schemaValue(schema, 5, STRUCTURED), v, "deterministic");
  assert.notDeepEqual(schemaValue(schema, 6, STRUCTURED), v, "seeded by the prompt");
});

test("OpenAI's strict shape: all properties required, no others, nullable through anyOf", () => {
  const schema = {
    type: "object",
    properties: {
      status: { type: "string", enum: ["ok"] },
      score: { type: "integer", minimum: 10 },
      reason: { anyOf: [{ type: "null" }, { type: "string", maxLength: 3 }] },
      steps: { type: "array", items: { $ref: "#/$defs/step" } },
    },
    required: ["status", "score", "reason", "steps"],
    additionalProperties: false,
    $defs: { step: { type: "object", properties: { n: { type: "number" } }, required: ["n"], additionalProperties: false } },
  };
  const v = schemaValue(schema, 0, STRUCTURED) as Record<string, any>;
  assert.deepEqual(Object.keys(v), ["status", "score", "reason", "steps"]);
  assert.equal(v.status, "ok");
  assert.equal(v.score, 10);
  assert.ok(typeof v.reason === "string" && v.reason.length <= 3);
  assert.deepEqual(v.steps, [{ n: 1 }]);
  const strict = z.fromJSONSchema(schema as never);
  assert.ok(strict.safeParse(v).success, "zod's reading of the JSON schema accepts it");
});

test("bounded: a recursive schema and a wide one give a small answer", () => {
  interface Tree {
    name: string;
    children: Tree[];
  }
  const TreeSchema: z.ZodType<Tree> = z.lazy(() => z.object({ name: z.string(), children: z.array(TreeSchema).max(50) }));
  const tree = schemaValue(z.toJSONSchema(TreeSchema), 1, STRUCTURED);
  assert.deepEqual(TreeSchema.parse(tree), tree);
  assert.ok(JSON.stringify(tree).length < 2_000, `${JSON.stringify(tree).length} characters`);

  const Wide = z.object({ rows: z.array(z.object({ cells: z.array(z.string()).min(16) })).min(16) });
  const wide = schemaValue(z.toJSONSchema(Wide), 1, STRUCTURED) as { rows: { cells: string[] }[] };
  assert.deepEqual(Wide.parse(wide), wide, "minItems are honoured even past the value budget");
  assert.equal(wide.rows.length, MAX_ITEMS);
  assert.ok(JSON.stringify(wide).length < 10_000);

  // A schema that requires itself has no finite instance: the answer stops (not valid, as an engine's cut answer).
  const selfRequired = { type: "object", properties: { next: { $ref: "#" } }, required: ["next"] };
  assert.ok(JSON.stringify(schemaValue(selfRequired, 0, STRUCTURED)).length < 1_000);
});

test("function arguments: required properties only, no default items", () => {
  const schema = {
    type: "object",
    properties: { q: { type: "string" }, tags: { type: "array", items: { type: "string" } } },
    required: ["tags"],
  };
  assert.deepEqual(schemaValue(schema, 3, { optional: false, defaultItems: 0 }), { tags: [] });
});
