// Audits and comparisons against a real service (`python -m service`, started here): how far
// each computation path's table is from the exact one (GET /v1/audit/{family}, JSON and
// PNG), and two tables side by side (POST /v1/compare).

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

// Llama 3.1's RoPE, as the GET names its parameters
const llama31 = {
  maxLen: 131072,
  headDim: 128,
  base: 500000,
  scaling: "llama3",
  factor: 8,
  lowFreqFactor: 1,
  highFreqFactor: 4,
  originalMaxPositionEmbeddings: 8192,
};
// a dynamic-NTK model: transformers rescales past 4096 by the sequence length, vLLM keeps
// one static table
const dynamic = {
  head_dim: 64,
  max_position_embeddings: 4096,
  rope_scaling: { rope_type: "dynamic", factor: 4.0 },
};
const THRESHOLDS = ["1e-3", "1e-2", "1e-1"];
const none = Object.fromEntries(THRESHOLDS.map((t) => [t, null]));

function byName(document) {
  return Object.fromEntries(document.paths.map((path) => [path.name, path]));
}

function isProblem(status, name) {
  return (error) => {
    assert.ok(error instanceof ProblemError, String(error));
    assert.equal(error.status, status);
    assert.ok(error.detail.includes(name), error.detail);
    return true;
  };
}

describe("audits", () => {
  test("Llama 3.1's: positions in bfloat16 go wrong at 257, in float16 at 2049", async () => {
    const document = await pe.audit("rotary", llama31);
    assert.equal(document.family, "rotary");
    assert.equal(document.parameters.scaling, "llama3");
    assert.equal(document.parameters.max_len, 131072);
    assert.deepEqual(document.thresholds, THRESHOLDS);
    const paths = byName(document);
    assert.equal(paths["bf16-positions"].first_over["1e-3"], 257);
    assert.equal(paths["fp16-positions"].first_over["1e-3"], 2049);
    assert.equal(paths.library.first_over["1e-1"], null);
    assert.ok("first_misdirected" in paths["bf16-positions"]);
    for (const path of document.paths) {
      assert.deepEqual(Object.keys(path.first_over), THRESHOLDS, path.name);
      assert.equal(path.bands[0].start, 0, path.name);
      assert.equal(path.bands.at(-1).stop, 131072, path.name);
    }
  });

  test("paths select and order, as an array or as text; bands are the edges given", async () => {
    for (const paths of [["fp16-positions", "library"], "fp16-positions,library"]) {
      const document = await pe.audit("rotary", { maxLen: 4096, headDim: 64, paths });
      assert.deepEqual(
        document.paths.map((path) => path.name),
        ["fp16-positions", "library"],
      );
    }
    const banded = await pe.audit("rotary", {
      maxLen: 8192,
      head_dim: 64,
      paths: ["bf16-positions"],
      bands: [100, 3000],
    });
    const [path] = banded.paths;
    assert.deepEqual(
      path.bands.map((band) => [band.start, band.stop]),
      [
        [0, 100],
        [100, 3000],
        [3000, 8192],
      ],
    );
    assert.ok(path.bands[0].max_error < 1e-3 && path.bands[1].max_error > 1e-3);
  });

  test("the sinusoidal and temperature families", async () => {
    const sinusoidal = await pe.audit("sinusoidal", {
      maxLen: 4096,
      dModel: 64,
      paths: ["library", "bf16-table"],
    });
    assert.equal(sinusoidal.parameters.d_model, 64);
    assert.deepEqual(
      sinusoidal.paths.map((path) => path.name),
      ["library", "bf16-table"],
    );
    assert.ok(!("first_misdirected" in sinusoidal.paths[0])); // rotary's only
    const temperature = await pe.audit("temperature", { maxLen: 65536, floorScale: 8192 });
    assert.equal(temperature.family, "temperature");
    assert.equal(temperature.parameters.floor_scale, 8192);
    assert.ok("library" in byName(temperature));
  });

  test("a refused audit is a ProblemError naming the parameter", async () => {
    const rotary = { maxLen: 1024, headDim: 64 };
    await assert.rejects(
      pe.audit("rotary", { ...rotary, paths: ["library", "no-such-path"] }),
      (error) => {
        isProblem(422, "paths")(error);
        assert.deepEqual(
          error.problem.errors.map((e) => e.name),
          ["paths"],
        );
        return true;
      },
    );
    await assert.rejects(pe.audit("rotary", { ...rotary, bands: "x" }), isProblem(422, "bands"));
    await assert.rejects(
      pe.audit("rotary", { ...rotary, dtype: "float64" }),
      isProblem(422, "dtype"),
    );
    await assert.rejects(
      pe.audit("sinusoidal", { maxLen: 1024, dModel: 64, paths: "device" }),
      isProblem(422, "paths"),
    );
    await assert.rejects(pe.audit("rope", { maxLen: 8 }), isProblem(404, "rope"));
  });

  test("the audit drawn: a PNG's bytes", async () => {
    const picture = await pe.auditPng("rotary", { ...llama31, paths: ["bf16-positions"] });
    assert.ok(picture instanceof Uint8Array);
    assert.deepEqual(Array.from(picture.subarray(0, 8)), [137, 80, 78, 71, 13, 10, 26, 10]);
    assert.ok(picture.length > 1000);
    await assert.rejects(
      pe.auditPng("rotary", { maxLen: 1024, headDim: 64, paths: "nope" }),
      isProblem(422, "paths"),
    );
  });
});

describe("comparisons", () => {
  test("library against exact: nothing past 1e-3 for head_dim 64 to 4096", async () => {
    const library = { family: "rotary", parameters: { headDim: 64 } };
    const exact = {
      family: "rotary",
      parameters: { headDim: 64, rounding: "exact", dtype: "float64" },
    };
    const found = await pe.compare(library, exact, { stop: 4096 });
    assert.equal(found.start, 0);
    assert.equal(found.stop, 4096);
    assert.deepEqual(found.first_over, none);
    assert.equal(found.bands.at(-1).stop, 4096);
    for (const band of found.bands) {
      assert.ok(band.mean_difference <= band.max_difference && band.max_difference < 1e-3);
      assert.ok(band.max_angle_drift < 1e-3);
    }
    assert.ok(found.bands.at(-1).max_difference > 0); // float32 is not float64
    const same = await pe.compare(library, library, { start: 100, stop: 4096 });
    assert.equal(same.bands[0].start, 100);
    assert.ok(same.bands.every((band) => band.max_difference === 0));
  });

  test("transformers against vLLM, dynamic, from one config", async () => {
    const ours = { family: "rotary", config: dynamic, parameters: { maxLen: 16384 } };
    const theirs = {
      family: "rotary",
      config: dynamic,
      parameters: { max_len: 16384, engine: "vllm" },
    };
    const found = await pe.compare(ours, theirs, { start: 4096, stop: 16384 });
    assert.equal(found.start, 4096);
    assert.equal(found.bands[0].start, 4096);
    assert.notEqual(found.first_over["1e-1"], null);
    assert.ok(Math.max(...found.bands.map((band) => band.max_angle_drift)) > 1);
    // the config as JSON text, its bytes or a Blob: the same comparison
    const text = JSON.stringify(dynamic);
    for (const config of [text, new TextEncoder().encode(text), new Blob([text])]) {
      const again = await pe.compare(
        { ...ours, config },
        { ...theirs, config },
        { start: 4096, stop: 16384 },
      );
      assert.deepEqual(again, found, config.constructor.name);
    }
    const same = await pe.compare(ours, ours, { start: 4096, stop: 16384 });
    assert.deepEqual(same.first_over, none);
  });

  test("parameters left null are not sent; lists go comma-separated", async () => {
    const plain = { family: "rotary", parameters: { headDim: 8, base: null, seqLen: undefined } };
    const longrope = {
      family: "rotary",
      parameters: {
        headDim: 8,
        scaling: "longrope",
        originalMaxPositionEmbeddings: 32,
        factor: 2,
        shortFactor: [1, 1, 1, 1],
        longFactor: Float64Array.from([1, 1, 1, 1]),
      },
    };
    const found = await pe.compare(plain, longrope, { stop: 16 });
    // longrope's attention factor, sqrt(1 + ln(factor) / ln(original)), on cos at 0
    const scale = Math.sqrt(1 + Math.log(2) / Math.log(32));
    assert.ok(Math.abs(found.bands[0].max_difference - (scale - 1)) < 1e-6);
    assert.equal(found.first_over["1e-2"], 0);
  });

  test("a refused comparison is a ProblemError naming the place", async () => {
    const rotary = { family: "rotary", parameters: { headDim: 64 } };
    await assert.rejects(
      pe.compare(rotary, { family: "rotary", parameters: {} }, { stop: 64 }),
      isProblem(422, "b.parameters.head_dim"),
    );
    await assert.rejects(
      pe.compare(rotary, { family: "alibi" }, { stop: 64 }),
      isProblem(422, "b.family"),
    );
    await assert.rejects(
      pe.compare(rotary, rotary, { start: 64, stop: 64 }),
      isProblem(422, "stop"),
    );
    await assert.rejects(pe.compare(rotary, "rotary", { stop: 64 }), TypeError);
    const nan = { ...rotary, config: { ...dynamic, rope_theta: NaN } };
    await assert.rejects(pe.compare(nan, rotary, { stop: 8 }), /JSON cannot hold/);
  });
});
