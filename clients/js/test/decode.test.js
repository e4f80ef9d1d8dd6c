// The decoders and encoders without a service.

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  decodeNpy,
  decodeRaw,
  decodeSafetensors,
  encodeNpy,
  float16ToFloat32,
  ProblemError,
  valuesOf,
} from "../index.js";

test("npy round trip, each dtype and rank", () => {
  const cases = [
    { data: Float32Array.from([1, 2.5, -3, 4, 5, 6]), shape: [2, 3], dtype: "float32" },
    { data: Float64Array.from([Math.PI, -0]), shape: [2], dtype: "float64" },
    { data: Uint16Array.from([0x3c00, 0xc000, 0x7c00, 0]), shape: [2, 1, 2], dtype: "float16" },
  ];
  for (const tensor of cases) {
    const bytes = encodeNpy(tensor);
    assert.equal((bytes.indexOf(0x0a) + 1) % 64, 0, "data aligned to 64 bytes");
    const again = decodeNpy(bytes);
    assert.deepEqual(again.shape, tensor.shape);
    assert.equal(again.dtype, tensor.dtype);
    assert.deepEqual(Array.from(again.data), Array.from(tensor.data));
  }
});

test("a big-endian, misaligned .npy is read", () => {
  // what numpy.save writes for np.array([1.5, -2], ">f8"), header 1.0 of 118 bytes
  let header = "{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }";
  header += " ".repeat(117 - header.length) + "\n";
  const bytes = new Uint8Array(10 + header.length + 16);
  bytes.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, header.length, 0]);
  bytes.set(new TextEncoder().encode(header), 10);
  const view = new DataView(bytes.buffer, 10 + header.length);
  view.setFloat64(0, 1.5, false);
  view.setFloat64(8, -2, false);
  const tensor = decodeNpy(bytes.subarray(0)); // offset 128: aligned, but big-endian
  assert.deepEqual(Array.from(tensor.data), [1.5, -2]);
  const shifted = new Uint8Array(bytes.length + 1);
  shifted.set(bytes, 1);
  assert.deepEqual(Array.from(decodeNpy(shifted.subarray(1)).data), [1.5, -2]);
  assert.throws(() => decodeNpy(new Uint8Array(12)), /not an \.npy file/);
});

test("safetensors: tensors by name, metadata, any alignment", () => {
  const header = JSON.stringify({
    __metadata__: { max_len: "2" },
    cos: { dtype: "F32", shape: [1, 2], data_offsets: [0, 8] },
    sin: { dtype: "F64", shape: [1], data_offsets: [8, 16] },
  });
  const bytes = new Uint8Array(8 + header.length + 16);
  const view = new DataView(bytes.buffer);
  view.setBigUint64(0, BigInt(header.length), true);
  bytes.set(new TextEncoder().encode(header), 8);
  const data = 8 + header.length;
  view.setFloat32(data, 0.5, true);
  view.setFloat32(data + 4, -1, true);
  view.setFloat64(data + 8, 0.25, true);
  const { tensors, metadata } = decodeSafetensors(bytes);
  assert.deepEqual(metadata, { max_len: "2" });
  assert.deepEqual(Array.from(tensors.cos.data), [0.5, -1]);
  assert.ok(tensors.cos.data instanceof Float32Array);
  assert.deepEqual(tensors.cos.shape, [1, 2]);
  assert.ok(tensors.sin.data instanceof Float64Array);
  assert.deepEqual(Array.from(tensors.sin.data), [0.25]);
});

test("raw bytes by their headers", () => {
  const bytes = new Uint8Array(Float32Array.from([1, 2, 3, 4, 5, 6]).buffer);
  const headers = new Headers({ "x-shape": "3,2", "x-dtype": "float32" });
  const tensor = decodeRaw(bytes, headers);
  assert.deepEqual(tensor.shape, [3, 2]);
  assert.deepEqual(Array.from(tensor.data), [1, 2, 3, 4, 5, 6]);
  assert.throws(() => decodeRaw(bytes, { shape: [4, 2], dtype: "float32" }), RangeError);
});

test("float16 bits are converted to their values", () => {
  const bits = Uint16Array.from([0x3c00, 0xc000, 0x3555, 0x0001, 0x7bff, 0xfc00, 0x7e00, 0x8000]);
  const values = float16ToFloat32(bits);
  assert.deepEqual(Array.from(values.subarray(0, 2)), [1, -2]);
  assert.equal(values[2], Math.fround(0.333251953125));
  assert.equal(values[3], 2 ** -24);
  assert.equal(values[4], 65504);
  assert.equal(values[5], -Infinity);
  assert.ok(Number.isNaN(values[6]));
  assert.ok(Object.is(values[7], -0));
  assert.equal(valuesOf({ data: bits, shape: [8], dtype: "float16" })[0], 1);
});

test("ProblemError carries the problem", () => {
  const error = new ProblemError(422, { type: "urn:x", title: "Bad", detail: "why" });
  assert.ok(error instanceof Error);
  assert.equal(error.message, "422 Bad: why");
  assert.equal(error.type, "urn:x");
  assert.equal(new ProblemError(502, {}).type, "about:blank");
});

test("the package has no runtime dependencies", async () => {
  const { readFile } = await import("node:fs/promises");
  const manifest = JSON.parse(await readFile(new URL("../package.json", import.meta.url)));
  assert.equal(manifest.type, "module");
  assert.equal(manifest.dependencies, undefined);
});
