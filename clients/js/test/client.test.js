// The client against a real service (`python -m service`, started here).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, ProblemError, valuesOf } from "../index.js";
import { maxDifference, rotary, sinusoidal, slopes } from "../support/expected.js";
import { startService } from "../support/server.js";

let service;
let pe;

before(async () => {
  service = await startService();
  pe = new Client(service.url, { timeout: 60000 });
});

after(async () => {
  await service?.stop();
});

function random(count, seed = 1) {
  const out = new Float32Array(count);
  let state = seed;
  for (let i = 0; i < count; i++) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    out[i] = state / 2 ** 30 - 1;
  }
  return out;
}

describe("sinusoidal tables", () => {
  test("raw (the default), npy and safetensors decode to the same values", async () => {
    const params = { maxLen: 100, dModel: 16, base: 100 };
    const raw = await pe.table(params);
    assert.deepEqual(raw.shape, [100, 16]);
    assert.equal(raw.dtype, "float32");
    assert.ok(raw.data instanceof Float32Array);
    assert.ok(maxDifference(raw.data, sinusoidal(0, 100, 16, 100)) < 1e-7);
    const npy = await pe.table({ ...params, format: "npy" });
    assert.deepEqual(npy, raw);
    const st = await pe.table({ ...params, format: "safetensors" });
    assert.deepEqual(Array.from(st.data), Array.from(raw.data));
    assert.deepEqual(st.shape, [100, 16]);
    assert.equal(st.metadata.max_len, "100");
    assert.equal(st.metadata.d_model, "16");
  });

  test("float64, a block, the split layout, snake_case names", async () => {
    const table = await pe.table({
      max_len: 50,
      d_model: 9,
      dtype: "float64",
      layout: "split",
      start: 40,
      dimStart: 0,
    });
    assert.deepEqual(table.shape, [10, 9]);
    assert.ok(table.data instanceof Float64Array);
    assert.ok(maxDifference(table.data, sinusoidal(40, 50, 9, 10000, "split")) < 1e-15);
  });

  test("float16 comes as its bits", async () => {
    for (const format of ["raw", "npy", "safetensors"]) {
      const table = await pe.table({ maxLen: 8, dModel: 8, dtype: "float16", format });
      assert.ok(table.data instanceof Uint16Array, format);
      assert.ok(maxDifference(valuesOf(table), sinusoidal(0, 8, 8)) < 5e-4, format);
    }
  });

  test("a preset's table", async () => {
    const table = await pe.table({ maxLen: 4, dModel: 8, preset: "fairseq", paddingIdx: 0 });
    assert.deepEqual(Array.from(table.data.subarray(0, 8)), [0, 0, 0, 0, 0, 0, 0, 0]);
    const presets = await pe.presets();
    assert.ok(presets.some((preset) => preset.name === "fairseq"));
  });
});

describe("rotary and ALiBi", () => {
  test("rotary cos and sin, in every format", async () => {
    const params = { maxLen: 32, headDim: 8, dtype: "float64", rounding: "exact" };
    const want = rotary(32, 8);
    for (const format of ["raw", "npy", "safetensors"]) {
      const { cos, sin } = await pe.rotary({ ...params, format });
      assert.deepEqual(cos.shape, [32, 8], format);
      assert.deepEqual(sin.shape, [32, 8], format);
      assert.ok(maxDifference(cos.data, want.cos) < 1e-15, format);
      assert.ok(maxDifference(sin.data, want.sin) < 1e-15, format);
    }
    const { metadata } = await pe.rotary({ ...params, format: "safetensors" });
    assert.equal(metadata.head_dim, "8");
    const scaled = await pe.rotary({ maxLen: 16, headDim: 8, scaling: "linear", factor: 2 });
    assert.equal(scaled.cos.shape[0], 16);
  });

  test("ALiBi slopes and biases", async () => {
    const exact = await pe.alibiSlopes({ numHeads: 8, dtype: "float64", rounding: "exact" });
    assert.deepEqual(Array.from(exact.data), slopes(8));
    const bloom = await pe.alibiSlopes({ numHeads: 12, format: "npy" });
    assert.ok(maxDifference(bloom.data, slopes(12)) < 1e-7);
    const bias = await pe.alibiBias({ numHeads: 2, maxLen: 3, rounding: "exact" });
    assert.deepEqual(bias.shape, [2, 3, 3]);
    const m = slopes(2)[0];
    assert.deepEqual(Array.from(bias.data.subarray(0, 9)), [
      0,
      -Infinity,
      -Infinity,
      Math.fround(-m),
      0,
      -Infinity,
      Math.fround(-2 * m),
      Math.fround(-m),
      0,
    ]);
  });
});

describe("apply", () => {
  const shape = [2, 16, 64];
  const x = { data: random(2 * 16 * 64), shape, dtype: "float32" };

  async function expected(offset) {
    const table = await pe.table({ maxLen: offset + 16, dModel: 64, start: offset });
    return x.data.map((value, i) => Math.fround(value * 0.5 + table.data[i % (16 * 64)]));
  }

  test("a batch posted as raw bytes", async () => {
    const y = await pe.apply(x, { scale: 0.5, offset: 3 });
    assert.deepEqual(y.shape, shape);
    assert.equal(y.dtype, "float32");
    assert.deepEqual(y.data, await expected(3));
  });

  test("a batch posted as .npy", async () => {
    const y = await pe.apply(x, { scale: 0.5, offset: 3, body: "npy" });
    assert.deepEqual(y.data, await expected(3));
  });

  test("a batch with position ids", async () => {
    const zeros = { data: new Float32Array(2 * 3 * 4), shape: [2, 3, 4], dtype: "float32" };
    const ids = [
      [0, 1, 2],
      [7, 7, 9],
    ];
    const y = await pe.apply(zeros, { positionIds: ids, maxLen: 10 });
    const table = await pe.table({ maxLen: 10, dModel: 4 });
    const rows = ids.flat().flatMap((p) => Array.from(table.data.subarray(p * 4, p * 4 + 4)));
    assert.deepEqual(Array.from(y.data), rows);
  });

  test("rotary: queries posted as raw bytes", async () => {
    const q = { data: random(3 * 4 * 8, 7), shape: [3, 4, 8], dtype: "float32" };
    const y = await pe.rotaryApply(q, { offset: 100, base: 500 });
    const { cos, sin } = await pe.rotary({ maxLen: 104, headDim: 8, base: 500, start: 100 });
    const want = new Float32Array(q.data.length);
    for (let i = 0; i < q.data.length; i += 8) {
      const row = ((i / 8) % 4) * 8;
      for (let k = 0; k < 4; k++) {
        const [a, b] = [q.data[i + k], q.data[i + k + 4]];
        const [c, s] = [cos.data[row + k], sin.data[row + k]];
        want[i + k] = Math.fround(a * c) - Math.fround(b * s);
        want[i + k + 4] = Math.fround(b * c) + Math.fround(a * s);
      }
    }
    assert.deepEqual(y.data, want);
  });
});

describe("problems and the rest", () => {
  test("an error answer is a ProblemError with its document", async () => {
    await assert.rejects(pe.table({ maxLen: 1e7, dModel: 1e4 }), (error) => {
      assert.ok(error instanceof ProblemError);
      assert.equal(error.status, 422);
      assert.equal(error.problem.setting, "PE_MAX_ELEMENTS");
      assert.match(error.type, /limit-exceeded$/);
      return true;
    });
    const flat = { data: new Float32Array(4), shape: [4], dtype: "float32" };
    await assert.rejects(pe.apply(flat), (error) => error.status === 422);
    await assert.rejects(pe.table({ maxLen: 4, dModel: 4, format: "json" }), TypeError);
  });

  test("readiness and the cache", async () => {
    assert.equal(await pe.ready(), true);
    const stats = await pe.cacheStats();
    assert.ok(stats.tables_total >= 1);
    const unreachable = new Client("http://127.0.0.1:9", { timeout: 2000 });
    await assert.rejects(unreachable.ready());
  });
});
