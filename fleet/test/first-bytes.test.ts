import { test } from "node:test";
import assert from "node:assert/strict";
import { FIRST_BYTE_TAGS_KEPT, FirstByteTags, requestTag } from "../first-bytes.ts";

test("a prompt's request tag: the first one, only in its own syntax", () => {
  assert.equal(requestTag("<|user|>[request-tag:s3-r17] why? [request-tag:other]"), "s3-r17");
  assert.equal(requestTag("request-tag:s3-r17"), undefined);
  assert.equal(requestTag("[request-tag:has space]"), undefined);
  assert.equal(requestTag(`[request-tag:${"x".repeat(65)}]`), undefined);
});

test("first bytes are counted per tag, the oldest tags forgotten past the bound", () => {
  const tags = new FirstByteTags();
  tags.record(undefined);
  for (let i = 0; i <= FIRST_BYTE_TAGS_KEPT; i++) tags.record(`t${i}`);
  tags.record("t5");
  const seen = tags.toJSON();
  assert.equal(Object.keys(seen).length, FIRST_BYTE_TAGS_KEPT);
  assert.equal(seen["t0"], undefined, "the oldest went");
  assert.equal(seen["t5"], 2);
  assert.equal(seen[`t${FIRST_BYTE_TAGS_KEPT}`], 1);
});
