// Diffusion timestep embeddings against a real service (`python -m service`, started here):
// the table, the embeddings at posted real timesteps (FLUX's bfloat16 hop), a diffusers
// config's, and a refusal naming its parameter.

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

describe("diffusion timestep embeddings", () => {
  test("the table, and rows at timesteps the same bits", async () => {
    const table = await pe.timestep({ maxLen: 1000, dim: 320, preset: "unet" });
    assert.deepEqual(table.shape, [1000, 320]);
    const at = await pe.timestepPositions([999, 0], { dim: 320, preset: "unet" });
    const last = Array.from(table.data.subarray(999 * 320));
    assert.deepEqual(Array.from(at.data.subarray(0, 320)), last);
  });

  test("the timestep presets, each with the code it follows", async () => {
    const listed = await pe.presets("timestep");
    const flux = listed.find((preset) => preset.name === "flux");
    assert.equal(flux.follows[0].repository, "black-forest-labs/flux");
    assert.deepEqual(await pe.presets("no-such-family"), []);
  });

  test("FLUX's sampler at σ 0.75 and 0.9 embeds 752 and 900", async () => {
    const flux = await pe.timestepPositions([750, 900], { dim: 256, preset: "flux" });
    const plain = await pe.timestepPositions([752, 900], {
      dim: 256,
      flipSinToCos: true,
      downscaleFreqShift: 0,
    });
    assert.deepEqual(Array.from(flux.data), Array.from(plain.data));
  });

  test("from a diffusers config.json", async () => {
    const config = { _class_name: "FluxTransformer2DModel" };
    const got = await pe.timestepFromConfig(config, { maxLen: 4 });
    const want = await pe.timestep({ maxLen: 4, dim: 256, preset: "flux-diffusers" });
    assert.deepEqual(Array.from(got.data), Array.from(want.data));
  });

  test("a parameter the preset fixes is refused, named", async () => {
    await assert.rejects(pe.timestep({ maxLen: 4, dim: 8, preset: "unet", scale: 2 }), (error) => {
      assert.ok(error instanceof ProblemError);
      assert.equal(error.status, 422);
      assert.match(error.detail, /scale/);
      return true;
    });
  });
});
