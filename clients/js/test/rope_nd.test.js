// Multi-axis RoPE against a real service (`python -m service`, started here): the table,
// the same at posted ids, a batch rotated, a diffusers config's, and a refusal naming its
// parameter.

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

describe("multi-axis RoPE", () => {
  test("the table, and rows at ids the same bits", async () => {
    const { cos } = await pe.ropeNd({ grid: [3, 4], preset: "flux", textTokens: 2 });
    assert.deepEqual(cos.shape, [14, 128]);
    const at = await pe.ropeNdPositions([[0], [2], [3]], { grid: [1, 1], preset: "flux" });
    assert.deepEqual(Array.from(at.cos.data), Array.from(cos.data.subarray(13 * 128)));
  });

  test("a batch rotated by its tokens' table", async () => {
    const data = new Float32Array(6 * 16).fill(1);
    const batch = { data, shape: [1, 1, 6, 16], dtype: "float32" };
    const { cos, sin } = await pe.ropeNd({ grid: [2, 3], axesDim: [8, 8] });
    const got = await pe.ropeNdApply(batch, { grid: [2, 3], axesDim: [8, 8] });
    assert.deepEqual(got.shape, [1, 1, 6, 16]);
    assert.equal(got.data[16], cos.data[16] - sin.data[16]);
  });

  test("from a diffusers config.json", async () => {
    const config = { _class_name: "WanTransformer3DModel" };
    const got = await pe.ropeNdFromConfig(config, { height: 64, width: 32, frames: 5, stop: 4 });
    const want = await pe.ropeNd({ grid: [2, 4, 2], preset: "wan", stop: 4 });
    assert.deepEqual(Array.from(got.sin.data), Array.from(want.sin.data));
  });

  test("a parameter the preset fixes is refused, named", async () => {
    await assert.rejects(pe.ropeNd({ grid: [2, 2], preset: "flux", theta: 500 }), (error) => {
      assert.ok(error instanceof ProblemError);
      assert.equal(error.status, 422);
      assert.match(error.detail, /theta/);
      return true;
    });
  });
});
