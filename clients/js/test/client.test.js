// The client against a real service (`python -m service`, started here).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, ProblemError, valuesOf } from "../index.js";
import { maxDifference, rotary, sinusoidal, slopes } from "../support/expected.js";
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

describe("rotary from a config.json", () => {
  // Llama 3.1 8B's config.json: its RoPE fields and those head_dim is read from
  const llama31 = {
    architectures: ["LlamaForCausalLM"],
    hidden_size: 4096,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    max_position_embeddings: 131072,
    rope_theta: 500000.0,
    rope_scaling: {
      factor: 8.0,
      low_freq_factor: 1.0,
      high_freq_factor: 4.0,
      original_max_position_embeddings: 8192,
      rope_type: "llama3",
    },
  };
  // the same, as the GET names it
  const llama31Query = {
    headDim: 128,
    base: 500000,
    scaling: "llama3",
    factor: 8,
    lowFreqFactor: 1,
    highFreqFactor: 4,
    originalMaxPositionEmbeddings: 8192,
  };
  // a plain RoPE model: no scaling, head_dim = hidden_size / num_attention_heads
  const plain = {
    hidden_size: 1024,
    num_attention_heads: 16,
    max_position_embeddings: 2048,
    rope_theta: 1000000.0,
  };
  const plainQuery = { headDim: 64, base: 1000000 };

  test("Llama 3.1's tables are the GET's", async () => {
    const got = await pe.fromConfig(llama31, { maxLen: 64 });
    assert.deepEqual(got, await pe.rotary({ ...llama31Query, maxLen: 64 }));
    assert.deepEqual(got.cos.shape, [64, 128]);
    assert.equal(got.cos.dtype, "float32");
    // no maxLen: the config's max_position_embeddings; only the last rows fetched
    const last = await pe.fromConfig(llama31, { start: 131064 });
    assert.deepEqual(last, await pe.rotary({ ...llama31Query, maxLen: 131072, start: 131064 }));
    assert.deepEqual(last.sin.shape, [8, 128]);
    const unscaled = await pe.rotary({ maxLen: 64, headDim: 128, base: 500000 });
    assert.notDeepEqual(got.cos.data, unscaled.cos.data); // the config's llama3 scaling
  });

  test("a plain config, as an object, JSON text and bytes, in every format", async () => {
    const want = await pe.rotary({ ...plainQuery, maxLen: 2048 });
    const text = JSON.stringify(plain);
    for (const config of [plain, text, new TextEncoder().encode(text)]) {
      assert.deepEqual(await pe.fromConfig(config), want, typeof config);
    }
    for (const format of ["npy", "safetensors"]) {
      const { cos, sin } = await pe.fromConfig(plain, { maxLen: 16, format });
      const exact = rotary(16, 64, 1000000);
      assert.ok(maxDifference(cos.data, exact.cos) < 1e-6, format);
      assert.ok(maxDifference(sin.data, exact.sin) < 1e-6, format);
    }
  });

  test("the parameters given override the config", async () => {
    const params = {
      maxLen: 40,
      start: 30,
      stop: 35,
      convention: "interleaved",
      rounding: "exact",
      dtype: "float64",
    };
    const got = await pe.fromConfig(llama31, params);
    assert.deepEqual(got, await pe.rotary({ ...llama31Query, ...params }));
    assert.deepEqual(got.cos.shape, [5, 128]);
    assert.ok(got.cos.data instanceof Float64Array);
    assert.equal(got.cos.data[0], got.cos.data[1]); // interleaved: pairs side by side
    const longer = await pe.fromConfig(plain, { max_len: 4096, start: 4090, rounding: "exact" });
    const want = rotary(4096, 64, 1000000);
    assert.ok(maxDifference(longer.cos.data, want.cos.subarray(4090 * 64)) < 1e-6);
  });

  test("a refused config is a ProblemError with the detail", async () => {
    await assert.rejects(pe.fromConfig({ ...plain, head_dim: 7 }), (error) => {
      assert.ok(error instanceof ProblemError);
      assert.equal(error.status, 422);
      assert.match(error.detail, /head_dim.*must be even/);
      return true;
    });
    await assert.rejects(pe.fromConfig({ head_dim: 8 }), (error) => {
      assert.match(error.detail, /give max_len/);
      return true;
    });
    await assert.rejects(pe.fromConfig("{not json", { maxLen: 8 }), (error) => {
      assert.equal(error.status, 400);
      assert.match(error.detail, /not JSON/);
      return true;
    });
    // JSON has no NaN: refused before it is sent (JSON.stringify would send null)
    await assert.rejects(pe.fromConfig({ ...plain, rope_theta: NaN }), TypeError);
    await assert.rejects(pe.fromConfig(null), TypeError);
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

  test("the generic call without maxLen, and the presets", async () => {
    await assert.rejects(pe.encoding("rotary", { headDim: 8 }), (error) => {
      assert.deepEqual(
        error.problem.errors.map((each) => each.name),
        ["max_len"],
      );
      return true;
    });
    await assert.rejects(pe.encoding("rotary"), (error) => error.status === 422);
    const stacked = await pe.encoding("rotary", { maxLen: 4, headDim: 8 });
    assert.deepEqual(stacked.shape, [2, 4, 8]);
    const presets = await pe.presets();
    assert.ok(presets.length >= 2);
    for (const preset of presets) {
      assert.equal(typeof preset.name, "string");
      assert.ok(Array.isArray(preset.parameters), preset.name);
    }
  });

  test("readiness and the cache", async () => {
    assert.equal(await pe.ready(), true);
    const stats = await pe.cacheStats();
    assert.ok(stats.tables_total >= 1);
    const unreachable = new Client("http://127.0.0.1:9", { timeout: 2000 });
    await assert.rejects(unreachable.ready());
  });
});
