// Vision towers' 2-D RoPE against a real service (`python -m service`, started here): the
// table, the same at posted patch coordinates either way round, a batch rotated, and a
// refusal naming its parameter.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, ProblemError } from "../index.js";
import { startService, WAIT } from "../support/server.js";

let service;
let pe;

before(async () => {
  service = await startService();
  pe = new Client(service.url, { timeout: WAIT });
});

after(async () => {
  await service?.stop();
});

describe("vision towers' RoPE", () => {
  test("the table, and rows at coordinates the same bits", async () => {
    // Qwen2.5-VL-7B's vision tower over 4 x 4 patches: 80 wide
    const { cos, sin } = await pe.visionRotary({ model: "qwen2_5_vl", grid: [1, 4, 4] });
    assert.deepEqual(cos.shape, [16, 80]);
    assert.deepEqual(sin.shape, [16, 80]);
    // Pixtral's rows are row-major: the patch (3, 2) of a 4 x 4 grid is row 14
    const table = await pe.visionRotary({ model: "pixtral", grid: "4,4" });
    const down = await pe.visionRotaryPositions([[3], [2]], { model: "pixtral", grid: [4, 4] });
    const pairs = [[3, 2], [0, 1], [1, 1]]; // [L][2]: a [row, column] a token
    const across = await pe.visionRotaryPositions(pairs, { model: "pixtral", grid: [4, 4] });
    const row = Array.from(table.sin.data.subarray(14 * 64, 15 * 64));
    assert.deepEqual(Array.from(down.sin.data), row);
    assert.deepEqual(Array.from(across.sin.data.subarray(0, 64)), Array.from(down.sin.data));
  });

  test("a batch rotated by its tokens' table, pairs as the model's apply", async () => {
    const { cos, sin } = await pe.visionRotary({ model: "llama4", grid: [2, 2] });
    const [tokens, width] = cos.shape;
    const data = new Float32Array(tokens * width).fill(1);
    const batch = { data, shape: [1, 1, tokens, width], dtype: "float32" };
    const got = await pe.visionRotaryApply(batch, { model: "llama4", grid: [2, 2] });
    assert.deepEqual(got.shape, [1, 1, tokens, width]);
    // interleaved pairs (2i, 2i+1): with ones, the first of each is cos - sin
    const at = width + 2;
    assert.equal(got.data[at], Math.fround(cos.data[at] - sin.data[at]));
  });

  test("a parameter the model does not take is refused, named", async () => {
    const asked = pe.visionRotary({ model: "pixtral", grid: [4, 4], windowIndex: true });
    await assert.rejects(asked, (error) => {
      assert.ok(error instanceof ProblemError);
      assert.equal(error.status, 422);
      assert.match(error.detail, /^window_index/);
      return true;
    });
  });
});
