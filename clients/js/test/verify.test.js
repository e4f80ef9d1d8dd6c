// Checking a table against a real service (`python -m service`, started here): a table
// against the GET or the config that should make it (POST /v1/verify), with the mistake
// that made it otherwise, and a table with no claim (POST /v1/identify).

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

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

// a small model's config.json: rotary tables of head dim 8, base 10000
const config = {
  hidden_size: 64,
  num_attention_heads: 8,
  max_position_embeddings: 64,
  rope_theta: 10000,
};

/** A tensor's rows as arrays of numbers. */
function rowsOf({ data, shape }) {
  return Array.from({ length: shape[0] }, (_, i) =>
    Array.from(data.subarray(i * shape[1], (i + 1) * shape[1])),
  );
}

const mistakes = (answer) => answer.diagnoses.map((diagnosis) => diagnosis.mistake);

test("a table as its GET gives it matches", async () => {
  const tensors = await pe.rotary({ maxLen: 64, headDim: 8, base: 500000 });
  const claim = { family: "rotary", parameters: { headDim: 8, base: 500000 } };
  const answer = await pe.verify(tensors, claim);
  assert.equal(answer.match, "bitwise");
  assert.equal(answer.rows, 64);
  assert.deepEqual(answer.diagnoses, []);
  assert.equal(answer.claim.parameters.head_dim, 8);
  const rows = { cos: rowsOf(tensors.cos), sin: rowsOf(tensors.sin) };
  assert.equal((await pe.verify(rows, claim)).match, "bitwise");
  // the GET's stacked [2, L, d] answer, read as cos and sin
  const stacked = await pe.encoding("rotary", { maxLen: 64, headDim: 8, base: 500000 });
  assert.deepEqual(stacked.shape, [2, 64, 8]);
  assert.equal((await pe.verify(stacked, claim)).match, "bitwise");
  // float16 rows: their dtype goes with them
  const half = await pe.rotary({ maxLen: 64, headDim: 8, base: 500000, dtype: "float16" });
  assert.equal((await pe.verify(half, claim)).match, "float16");
});

test("the mistake is named", async () => {
  const tensors = await pe.rotary({ maxLen: 64, headDim: 8, base: 10000 });
  const answer = await pe.verify(tensors, {
    family: "rotary",
    parameters: { headDim: 8, base: 500000 },
  });
  assert.equal(answer.match, "different");
  assert.equal(mistakes(answer)[0], "base");
  assert.equal(answer.diagnoses[0].parameters.base, 10000);
  assert.notEqual(answer.first_over["1e-3"], null);
  const interleaved = await pe.rotary({ maxLen: 64, headDim: 8, convention: "interleaved" });
  const paired = await pe.verify(interleaved, { family: "rotary", parameters: { headDim: 8 } });
  assert.equal(paired.match, "different");
  assert.ok(mistakes(paired).includes("pairing"), mistakes(paired));
});

test("against a model's config, from a start", async () => {
  const { cos, sin } = await pe.fromConfig(config);
  const rows = { cos: rowsOf(cos), sin: rowsOf(sin) };
  const answer = await pe.verify(rows, { config });
  assert.equal(answer.match, "bitwise");
  assert.equal(answer.claim.parameters.head_dim, 8);
  const later = { cos: rows.cos.slice(8), sin: rows.sin.slice(8) };
  const fromText = await pe.verify(later, { config: JSON.stringify(config), start: 8 });
  assert.equal(fromText.match, "bitwise");
  const ids = Array.from({ length: 56 }, (_, i) => i + 8);
  assert.equal((await pe.verify(later, { config, positionIds: ids })).match, "bitwise");
  assert.equal((await pe.verify(later, { config })).match, "different");
  const other = { ...config, rope_theta: 500000 };
  assert.equal(mistakes(await pe.verify(rows, { config: other }))[0], "base");
});

test("identify reads the table", async () => {
  const tensors = await pe.rotary({ maxLen: 64, headDim: 8, base: 500000 });
  const answer = await pe.identify(tensors);
  assert.equal(answer.matched, true);
  const [best] = answer.candidates;
  assert.equal(best.family, "rotary");
  assert.equal(best.match, "bitwise");
  assert.equal(best.parameters.base, 500000);
  assert.equal(answer.read.pairing, "half");
  // the candidate is a GET that gives the table back
  const again = await pe.encoding(best.family, best.parameters);
  assert.deepEqual(again.data.subarray(0, 64 * 8), tensors.cos.data);
  const table = await pe.table({ maxLen: 32, dModel: 16 });
  assert.equal((await pe.identify({ data: table })).candidates[0].family, "sinusoidal");
});

test("a refused table raises the problem", async () => {
  const { cos } = await pe.rotary({ maxLen: 16, headDim: 8 });
  const claim = { family: "rotary", parameters: { headDim: 8 } };
  await assert.rejects(pe.verify({ cos }, claim), (error) => {
    assert.ok(error instanceof ProblemError);
    assert.equal(error.status, 422);
    assert.match(error.detail, /^sin: /);
    return true;
  });
  await assert.rejects(pe.verify({ data: rowsOf(cos) }), (error) => {
    assert.ok(error instanceof ProblemError);
    assert.match(error.detail, /^family: /);
    return true;
  });
  await assert.rejects(pe.identify({ data: [[1, 2], [3]] }), (error) => {
    assert.ok(error instanceof ProblemError);
    assert.equal(error.status, 422);
    assert.match(error.detail, /^data: /);
    return true;
  });
  // JSON has no NaN: refused before anything is sent
  await assert.rejects(pe.identify({ data: [[1, Number.NaN]] }), TypeError);
  await assert.rejects(pe.identify({ cos: [[1]], tan: [[1]] }), /tan is not cos, sin or data/);
});
