import { describe, expect, it } from "vitest";
import { chat, registerAll } from "../helpers.ts";

describe("smoke", () => {
  it("routes a chat completion to a registered node", async () => {
    await registerAll([{ id: "n1", region: "eu", models: ["m-eu"] }]);
    const res = await chat({ model: "m-eu", messages: [{ role: "user", content: "hi" }] });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-warmpath-node")).toBe("n1");
    const body = await res.json<{ choices: unknown[] }>();
    expect(body.choices).toHaveLength(1);
  });
});
