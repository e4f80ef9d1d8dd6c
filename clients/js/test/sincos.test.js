// Sin-cos grid tables against a real service (`python -m service`, started here): the 2-D
// table and a preset's parameters, the 3-D table, a diffusers config's, and a refusal
// naming its parameter.

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

describe("sin-cos grid tables", () => {
  test("the 2-D table: extra tokens first, SD3's crop the centre of its grid", async () => {
    const table = await pe.sincos2d({ height: 16, width: 16, dim: 64, extraTokens: 1 });
    assert.deepEqual(table.shape, [257, 64]);
    assert.ok(Array.from(table.data.subarray(0, 64)).every((value) => value === 0));
    const crop = await pe.sincos2d({ height: 1, width: 1, dim: 16, preset: "sd3", posEmbedMaxSize: 3 });
    const full = await pe.sincos2d({ height: 3, width: 3, dim: 16, preset: "sd3", posEmbedMaxSize: 3 });
    assert.deepEqual(Array.from(crop.data), Array.from(full.data.subarray(4 * 16, 5 * 16)));
  });

  test("the 3-D table is CogVideoX-2b's config's", async () => {
    const params = { start: 226, stop: 260 };
    const table = await pe.sincos3d({ frames: 13, height: 30, width: 45, dim: 1920, preset: "cogvideox", ...params });
    const config = { _class_name: "CogVideoXTransformer3DModel" };
    const read = await pe.sincos3dFromConfig(config, { frames: 49, height: 480, width: 720, ...params });
    assert.deepEqual(read.shape, [34, 1920]);
    assert.deepEqual(Array.from(read.data), Array.from(table.data));
  });

  test("a parameter the preset does not take is a 422 naming it", async () => {
    await assert.rejects(
      pe.sincos2d({ height: 4, width: 4, dim: 16, preset: "timm", extraTokens: 1 }),
      (error) => error instanceof ProblemError && error.status === 422 && error.detail.includes("extra_tokens"),
    );
  });

  test("a 2-D config's table", async () => {
    const table = await pe.sincos2dFromConfig({ _class_name: "DiTTransformer2DModel" }, { stop: 2 });
    assert.deepEqual(table.shape, [2, 1152]);
  });
});
