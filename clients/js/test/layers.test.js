// Rotary tables at position ids and M-RoPE's ids, a model's tables by layer type, Llama 4's
// attention temperature and the engine's parameters, against a real service
// (`python -m service`, started here): the same values as the GET of the same parameters.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, ProblemError } from "../index.js";
import { maxDifference } from "../support/expected.js";
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

/** Rows `ids` of a `[rows, width]` tensor, as one array. */
function rows(tensor, ids) {
  const width = tensor.shape[1];
  return ids.flatMap((p) => Array.from(tensor.data.subarray(p * width, (p + 1) * width)));
}

// Qwen2-VL: 3 text tokens, an image of 1 x 4 x 4 patches (2 x 2 tokens once merged), 2 more;
// get_rope_index's ids: the image's grid at 3, the text after it from the largest id + 1
const layout = [{ text: 3 }, { image: [1, 4, 4] }, { text: 2 }];
const layoutIds = [
  [0, 1, 2, 3, 3, 3, 3, 5, 6],
  [0, 1, 2, 3, 3, 4, 4, 5, 6],
  [0, 1, 2, 3, 4, 3, 4, 5, 6],
];

describe("rotary tables at position ids, and M-RoPE's ids", () => {
  test("rows at position ids are the GET's rows", async () => {
    const params = { maxLen: 8, headDim: 16, base: 500, dtype: "float64" };
    const table = await pe.rotary(params);
    const ids = [
      [7, 0, 3],
      [3, 3, 1],
    ];
    for (const format of ["raw", "npy", "safetensors"]) {
      const { cos, sin } = await pe.rotaryPositions(ids, { ...params, format });
      assert.deepEqual(cos.shape, [2, 3, 16], format);
      assert.ok(cos.data instanceof Float64Array, format);
      assert.deepEqual(Array.from(cos.data), rows(table.cos, ids.flat()), format);
      assert.deepEqual(Array.from(sin.data), rows(table.sin, ids.flat()), format);
    }
    // typed arrays of ids, bigints too
    for (const typed of [Int32Array.from([7, 0]), BigInt64Array.from([7n, 0n])]) {
      const { cos } = await pe.rotaryPositions(typed, params);
      assert.deepEqual(Array.from(cos.data), rows(table.cos, [7, 0]));
    }
    await assert.rejects(pe.rotaryPositions([0, -1], params), (error) => {
      assert.ok(error instanceof ProblemError);
      assert.match(error.detail, /non-negative/);
      return true;
    });
  });

  test("M-RoPE: each pair at its axis's position", async () => {
    const table = await pe.rotary({ maxLen: 16, headDim: 16 });
    // mropeSection 2,3,3 in order: pairs 0-1 by t, 2-4 by h, 5-7 by w (columns k, k + 8)
    const axis = [0, 0, 1, 1, 1, 2, 2, 2];
    const want = layoutIds[0].flatMap((_, l) =>
      Array.from({ length: 16 }, (_, c) => table.cos.data[layoutIds[axis[c % 8]][l] * 16 + c]),
    );
    for (const mropeSection of [[2, 3, 3], "2,3,3"]) {
      const params = { maxLen: 16, headDim: 16, mropeSection };
      const { cos } = await pe.rotaryPositions(layoutIds, params);
      assert.deepEqual(cos.shape, [9, 16]);
      assert.deepEqual(Array.from(cos.data), want);
      const batch = layoutIds.map((axisIds) => [axisIds, axisIds]); // [3][2][L]
      const twice = await pe.rotaryPositions(batch, params);
      assert.deepEqual(twice.cos.shape, [2, 9, 16]);
      assert.deepEqual(Array.from(twice.cos.data), [...want, ...want]);
    }
    const interleaved = await pe.rotaryPositions(layoutIds, {
      maxLen: 16,
      headDim: 16,
      mropeSection: [2, 3, 3],
      mropeInterleaved: true,
    });
    assert.notDeepEqual(Array.from(interleaved.cos.data), want);
  });

  test("M-RoPE's position ids of a layout", async () => {
    const got = await pe.mropePositions(layout);
    assert.deepEqual(got.positionIds, layoutIds);
    assert.equal(got.ropeDelta, 7 - 9);
    assert.equal(got.length, 9);
    assert.equal(got.model, "qwen2_vl");
    assert.equal(got.spatialMergeSize, 2);
    assert.equal(got.tokensPerSecond, null);
    const grid = [{ text: 3 }, { image: Int32Array.from([1, 4, 4]) }, { text: 2 }];
    assert.deepEqual((await pe.mropePositions(grid)).positionIds, layoutIds);
    // the settings, and a config's, as the service's own JSON answer says
    const video = [{ text: 2 }, { video: [4, 4, 4], seconds_per_grid: 2 }, { text: 1 }];
    const settings = { model: "qwen2_5_vl", spatial_merge_size: 2, tokens_per_second: 2 };
    const response = await fetch(`${service.url}/v1/positions/mrope?format=json`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ segments: video, ...settings }),
    });
    const document = await response.json();
    const qwen25 = await pe.mropePositions(video, { model: "qwen2_5_vl", tokensPerSecond: 2 });
    assert.deepEqual(qwen25.positionIds, document.position_ids);
    assert.equal(qwen25.ropeDelta, document.rope_delta);
    const config = { model_type: "qwen2_5_vl", vision_config: { tokens_per_second: 2 } };
    for (const given of [config, JSON.stringify(config)]) {
      const fromConfig = await pe.mropePositions(video, { config: given });
      assert.deepEqual(fromConfig.positionIds, document.position_ids);
    }
    await assert.rejects(pe.mropePositions([{ text: 1 }, { image: [1, 3, 4] }]), (error) => {
      assert.equal(error.status, 422);
      assert.match(error.detail, /spatial_merge_size/);
      return true;
    });
    await assert.rejects(pe.mropePositions(layout, { config: { x: NaN } }), TypeError);
  });
});

describe("a model's tables by layer type", () => {
  // Gemma 3's text model, small: sliding layers at theta 1e4, full at 1e6 with linear by 8
  const gemma3 = {
    model_type: "gemma3_text",
    head_dim: 8,
    max_position_embeddings: 16,
    num_hidden_layers: 6,
    layer_types: [...Array(5).fill("sliding_attention"), "full_attention"],
    rope_parameters: {
      sliding_attention: { rope_type: "default", rope_theta: 10000 },
      full_attention: { rope_type: "linear", factor: 8, rope_theta: 1000000 },
    },
  };
  const queries = {
    sliding_attention: { maxLen: 16, headDim: 8, base: 10000 },
    full_attention: { maxLen: 16, headDim: 8, base: 1000000, scaling: "linear", factor: 8 },
  };

  test("every layer type's tables, and which layer is which", async () => {
    const layers = await pe.rotaryLayers(gemma3, { stop: 10 });
    assert.deepEqual(Object.keys(layers.tables).sort(), ["full_attention", "sliding_attention"]);
    for (const [name, query] of Object.entries(queries)) {
      const { cos, sin } = await pe.rotary({ ...query, stop: 10 });
      assert.deepEqual(layers.tables[name].cos.data, cos.data, name);
      assert.deepEqual(layers.tables[name].sin.data, sin.data, name);
      assert.deepEqual(layers.tables[name].cos.shape, [10, 8], name);
    }
    assert.deepEqual(layers.layerTypes, gemma3.layer_types);
    assert.ok(layers.configFields.includes("rope_parameters.full_attention.factor"));
  });

  test("one layer type's table, a config of one table, fromConfig's layerType", async () => {
    const want = await pe.rotary(queries.full_attention);
    const one = await pe.rotaryLayers(gemma3, { layerType: "full_attention" });
    assert.deepEqual(Object.keys(one.tables), ["full_attention"]);
    assert.deepEqual(one.tables.full_attention.cos.data, want.cos.data);
    const same = await pe.fromConfig(gemma3, { layerType: "full_attention" });
    assert.deepEqual(same.sin.data, want.sin.data);
    await assert.rejects(pe.fromConfig(gemma3), (error) => {
      assert.equal(error.status, 422); // raw holds one table
      assert.match(error.detail, /layer_type/);
      return true;
    });
    await assert.rejects(pe.fromConfig(gemma3, { format: "safetensors" }), /give layerType/);
    const plain = { head_dim: 8, max_position_embeddings: 16, rope_theta: 500 };
    const single = await pe.rotaryLayers(plain, { maxLen: 12 });
    assert.deepEqual(Object.keys(single.tables), [""]);
    const table = await pe.rotary({ maxLen: 12, headDim: 8, base: 500 });
    assert.deepEqual(single.tables[""].cos.data, table.cos.data);
    assert.equal(single.layerTypes, null);
    assert.deepEqual(single.configFields.sort(), [
      "head_dim",
      "max_position_embeddings",
      "rope_theta",
    ]);
  });
});

describe("Llama 4's attention temperature", () => {
  const scale = (p, floorScale, attnScale) =>
    Math.log1p(Math.floor((p + 1) / floorScale)) * attnScale + 1;

  test("the scales by position, in every format", async () => {
    const raw = await pe.temperature({ maxLen: 8200, start: 8180 });
    assert.deepEqual(raw.shape, [20]);
    assert.ok(raw.data instanceof Float32Array);
    const want = Array.from({ length: 20 }, (_, i) => scale(8180 + i, 8192, 0.1));
    assert.ok(maxDifference(raw.data, want) < 1e-6);
    for (const format of ["npy", "safetensors"]) {
      const other = await pe.temperature({ maxLen: 8200, start: 8180, format });
      assert.deepEqual(other.data, raw.data, format);
    }
    const exact = await pe.temperature({
      maxLen: 40,
      floorScale: 8,
      attnScale: 2,
      rounding: "exact",
      dtype: "float64",
    });
    const formula = Array.from({ length: 40 }, (_, p) => scale(p, 8, 2));
    assert.ok(maxDifference(exact.data, formula) < 1e-15);
  });

  test("from a Llama 4 config.json, with each layer's kind", async () => {
    const llama4 = {
      model_type: "llama4",
      text_config: {
        model_type: "llama4_text",
        num_hidden_layers: 8,
        floor_scale: 4,
        attn_scale: 0.5,
        max_position_embeddings: 64,
      },
    };
    const { scales, layerTypes } = await pe.temperatureFromConfig(llama4);
    assert.deepEqual(layerTypes, ["rope", "rope", "rope", "nope", "rope", "rope", "rope", "nope"]);
    const want = await pe.temperature({ maxLen: 64, floorScale: 4, attnScale: 0.5 });
    assert.deepEqual(scales, want);
    const plain = await pe.temperatureFromConfig(JSON.stringify({ max_position_embeddings: 8 }));
    assert.equal(plain.layerTypes, null);
    assert.deepEqual(plain.scales.shape, [8]);
    const off = { ...llama4.text_config, attn_temperature_tuning: false };
    await assert.rejects(pe.temperatureFromConfig(off), /attn_temperature_tuning/);
  });
});

describe("the engine's parameters", () => {
  // dynamic NTK: vLLM keeps one static table, transformers' grows with maxLen
  const dynamic = { scaling: "dynamic", factor: 2, maxPositionEmbeddings: 16 };

  test("rotary, fromConfig and rotaryApply pass engine, cacheDtype, maxModelLen on", async () => {
    const table = { maxLen: 64, headDim: 8, ...dynamic };
    const vllm = await pe.rotary({ ...table, engine: "vllm" });
    assert.notDeepEqual(vllm.cos.data, (await pe.rotary(table)).cos.data);
    const bf16 = await pe.rotary({ ...table, engine: "vllm", cacheDtype: "bfloat16" });
    const bits = new Uint32Array(bf16.cos.data.buffer, bf16.cos.data.byteOffset, 64 * 8);
    assert.ok(bits.every((word) => (word & 0xffff) === 0)); // bfloat16's values in float32
    const longrope = {
      maxLen: 16,
      headDim: 8,
      scaling: "longrope",
      factor: 2,
      shortFactor: [1, 1, 1, 1],
      longFactor: [1, 1.5, 2, 4],
      originalMaxPositionEmbeddings: 32,
      engine: "vllm",
    };
    const deployed = await pe.rotary({ ...longrope, maxModelLen: 64 });
    assert.notDeepEqual(deployed.cos.data, (await pe.rotary(longrope)).cos.data);
    // from a config: vLLM's table in the config's dtype, bfloat16
    const config = {
      head_dim: 8,
      max_position_embeddings: 16,
      dtype: "bfloat16",
      rope_scaling: { rope_type: "dynamic", factor: 2 },
    };
    const fromConfig = await pe.fromConfig(config, { maxLen: 64, engine: "vllm" });
    assert.deepEqual(fromConfig.cos.data, bf16.cos.data);
    const float32 = await pe.fromConfig(config, {
      maxLen: 64,
      engine: "vllm",
      cacheDtype: "float32",
    });
    assert.deepEqual(float32.cos.data, vllm.cos.data);
    // rotated by vLLM's bfloat16 table: at position 50, x = (1, 0, ...) turns to (cos, sin)
    const x = { data: new Float32Array(8), shape: [1, 8], dtype: "float32" };
    x.data[0] = 1;
    const y = await pe.rotaryApply(x, {
      offset: 50,
      maxLen: 64,
      ...dynamic,
      engine: "vllm",
      cacheDtype: "bfloat16",
    });
    assert.equal(y.data[0], bf16.cos.data[50 * 8]);
    assert.equal(y.data[4], bf16.sin.data[50 * 8]);
  });
});
