// A client for the positional-encoding service: an ES module with no dependencies, on
// `fetch` (Node 18+ and browsers). Tables arrive as raw little-endian bytes (the default),
// `.npy` or safetensors and are decoded into typed arrays; batches to apply are posted as
// raw bytes with X-Shape and X-Dtype headers. Error answers raise a ProblemError that
// carries the RFC 9457 problem document. Types: index.d.ts.

const ARRAYS = { float32: Float32Array, float64: Float64Array, float16: Uint16Array };
const NPY_DTYPES = { f4: "float32", f8: "float64", f2: "float16" };
const SAFETENSORS_DTYPES = { F32: "float32", F64: "float64", F16: "float16" };
const FORMATS = ["raw", "npy", "safetensors"];
const NPY_MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // "\x93NUMPY"

/** An error answer of the service: `status` and its RFC 9457 `problem` document. */
export class ProblemError extends Error {
  constructor(status, problem) {
    const title = problem.title ?? "";
    const detail = problem.detail ?? "";
    super(`${status} ${title}: ${detail}`);
    this.name = "ProblemError";
    this.status = status;
    this.problem = problem;
    this.type = problem.type ?? "about:blank";
    this.title = title;
    this.detail = detail;
  }
}

function elements(shape) {
  return shape.reduce((product, n) => product * n, 1);
}

/** `count` elements of `dtype` at `offset` of `buffer` (an ArrayBuffer), little-endian;
 * a view when the offset is aligned, else a copy. */
function typed(buffer, offset, dtype, count, littleEndian = true) {
  const Type = ARRAYS[dtype];
  if (!Type) throw new TypeError(`unsupported dtype ${dtype}`);
  const size = Type.BYTES_PER_ELEMENT;
  if (offset + count * size > buffer.byteLength) {
    throw new RangeError(`${count} ${dtype} elements need more bytes than the body has`);
  }
  if (littleEndian && offset % size === 0) return new Type(buffer, offset, count);
  const out = new Type(count);
  const view = new DataView(buffer, offset, count * size);
  const read = { 2: "getUint16", 4: "getFloat32", 8: "getFloat64" }[size];
  for (let i = 0; i < count; i++) out[i] = view[read](i * size, littleEndian);
  return out;
}

function arrayBufferOf(bytes) {
  if (bytes instanceof ArrayBuffer) return bytes;
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
}

/** A raw answer: little-endian C-order bytes, shaped by its X-Shape and X-Dtype headers
 * (a `Headers` object, or `{shape, dtype}`). */
export function decodeRaw(bytes, headers) {
  const buffer = arrayBufferOf(bytes);
  let shape, dtype;
  if (typeof headers?.get === "function") {
    const text = headers.get("x-shape");
    shape = text ? text.split(",").map(Number) : [];
    dtype = headers.get("x-dtype");
  } else {
    ({ shape, dtype } = headers);
  }
  const count = elements(shape);
  if (count * ARRAYS[dtype].BYTES_PER_ELEMENT !== buffer.byteLength) {
    throw new RangeError(`raw ${dtype} of shape ${shape} is not ${buffer.byteLength} bytes`);
  }
  return { data: typed(buffer, 0, dtype, count), shape, dtype };
}

/** An `.npy` file (versions 1 to 3, float16/32/64, either byte order, C order). */
export function decodeNpy(bytes) {
  const buffer = arrayBufferOf(bytes);
  const head = new Uint8Array(buffer, 0, Math.min(10, buffer.byteLength));
  if (head.length < 10 || NPY_MAGIC.some((byte, i) => head[i] !== byte)) {
    throw new TypeError("not an .npy file");
  }
  const view = new DataView(buffer);
  const version = head[6];
  const wide = version >= 2;
  const length = wide ? view.getUint32(8, true) : view.getUint16(8, true);
  const start = wide ? 12 : 10;
  const header = new TextDecoder(version >= 3 ? "utf-8" : "latin1").decode(
    new Uint8Array(buffer, start, length),
  );
  const descr = /'descr':\s*'([<>|=])([a-z])(\d+)'/.exec(header);
  const fortran = /'fortran_order':\s*(True|False)/.exec(header);
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shapeText) throw new TypeError(`bad .npy header: ${header}`);
  const dtype = NPY_DTYPES[descr[2] + descr[3]];
  if (!dtype) throw new TypeError(`unsupported .npy dtype ${descr.slice(1).join("")}`);
  if (fortran[1] === "True") throw new TypeError("Fortran-order .npy is not supported");
  const shape = shapeText[1]
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map(Number);
  const data = typed(buffer, start + length, dtype, elements(shape), descr[1] !== ">");
  return { data, shape, dtype };
}

/** A safetensors file: `{tensors: {name: tensor}, metadata}`. */
export function decodeSafetensors(bytes) {
  const buffer = arrayBufferOf(bytes);
  const view = new DataView(buffer);
  const length = Number(view.getBigUint64(0, true));
  if (8 + length > buffer.byteLength) throw new RangeError("safetensors header past the end");
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 8, length)));
  const { __metadata__: metadata = {}, ...entries } = header;
  const tensors = {};
  for (const [name, entry] of Object.entries(entries)) {
    const dtype = SAFETENSORS_DTYPES[entry.dtype];
    if (!dtype) throw new TypeError(`unsupported safetensors dtype ${entry.dtype} (${name})`);
    const [begin, end] = entry.data_offsets;
    const count = elements(entry.shape);
    if (end - begin !== count * ARRAYS[dtype].BYTES_PER_ELEMENT) {
      throw new RangeError(`tensor ${name}: data_offsets do not match its shape`);
    }
    const data = typed(buffer, 8 + length + begin, dtype, count);
    tensors[name] = { data, shape: entry.shape, dtype, metadata };
  }
  return { tensors, metadata };
}

/** `{data, shape, dtype}` as an `.npy` file (version 1.0, little-endian, C order). */
export function encodeNpy({ data, shape, dtype }) {
  const code = { float32: "<f4", float64: "<f8", float16: "<f2" }[dtype];
  if (!code) throw new TypeError(`unsupported dtype ${dtype}`);
  const dims = shape.length === 1 ? `${shape[0]},` : shape.join(", ");
  let header = `{'descr': '${code}', 'fortran_order': False, 'shape': (${dims}), }`;
  header += " ".repeat(63 - ((10 + header.length) % 64)) + "\n"; // data aligned to 64
  const bytes = new Uint8Array(10 + header.length + data.byteLength);
  bytes.set(NPY_MAGIC);
  bytes.set([1, 0, header.length & 0xff, header.length >> 8], 6);
  bytes.set(new TextEncoder().encode(header), 10);
  bytes.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), 10 + header.length);
  return bytes;
}

/** IEEE half-precision bits (a Uint16Array, as float16 tensors are held) as a Float32Array
 * of the same values. */
export function float16ToFloat32(bits) {
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) {
    const h = bits[i];
    const sign = h & 0x8000 ? -1 : 1;
    const exponent = (h >> 10) & 0x1f;
    const fraction = h & 0x3ff;
    if (exponent === 0) out[i] = sign * fraction * 2 ** -24;
    else if (exponent === 31) out[i] = fraction ? NaN : sign * Infinity;
    else out[i] = sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
  }
  return out;
}

/** A tensor's values as numbers: float16 bits converted, the others as they are. */
export function valuesOf(tensor) {
  return tensor.dtype === "float16" ? float16ToFloat32(tensor.data) : tensor.data;
}

/** `maxLen` -> `max_len`; names already in snake_case stay as they are. */
function snake(name) {
  return name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

function queryOf(params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined || value === null) continue;
    query.set(snake(name), Array.isArray(value) ? value.join(",") : String(value));
  }
  return query;
}

function nested(values, shape) {
  if (shape.length === 1) return Array.from(values);
  const step = elements(shape.slice(1));
  return Array.from({ length: shape[0] }, (_, i) =>
    nested(values.subarray(i * step, (i + 1) * step), shape.slice(1)),
  );
}

function decode(format, bytes, headers) {
  if (format === "npy") return decodeNpy(bytes);
  if (format === "safetensors") return decodeSafetensors(bytes);
  return decodeRaw(bytes, headers);
}

function only(decoded) {
  if (!decoded.tensors) return decoded;
  const names = Object.keys(decoded.tensors);
  const name = names.includes("data") ? "data" : names[0];
  if (names.length !== 1 && name !== "data") throw new TypeError(`tensors ${names}: which?`);
  return decoded.tensors[name];
}

/** A model's config.json as a request body: JSON text or bytes as they are, an object as
 * JSON. A number JSON cannot hold (NaN, Infinity) is refused here: JSON.stringify would
 * send null, which the config's reader takes for "not given". */
function configBody(config) {
  if (typeof config === "string" || config instanceof ArrayBuffer || ArrayBuffer.isView(config)) {
    return config;
  }
  if (typeof Blob !== "undefined" && config instanceof Blob) return config;
  if (config === null || typeof config !== "object" || Array.isArray(config)) {
    throw new TypeError("config must be an object, JSON text, or the bytes of a config.json");
  }
  return jsonOf(config, "config");
}

/** `document` as JSON text, refusing a number JSON cannot hold (NaN, Infinity), which
 * JSON.stringify would send as null. */
function jsonOf(document, what) {
  return JSON.stringify(document, (name, value) => {
    // a typed array (an image_grid_thw) as the list of its numbers
    if (ArrayBuffer.isView(value) && !(value instanceof DataView)) return Array.from(value, Number);
    if (typeof value === "number" && !Number.isFinite(value)) {
      throw new TypeError(`${what}: ${name} is ${value}, which JSON cannot hold`);
    }
    return value;
  });
}

/** A config.json inside a JSON body: an object as it is; JSON text or bytes parsed. */
function configObject(config) {
  if (typeof config === "string") return JSON.parse(config);
  if (config instanceof ArrayBuffer || ArrayBuffer.isView(config)) {
    const view = config instanceof ArrayBuffer ? new Uint8Array(config) : config;
    return JSON.parse(new TextDecoder().decode(view));
  }
  return config;
}

/** One table of a comparison as the body says it: its `config` (an object, JSON text, its
 * bytes or a Blob) parsed; its `parameters` named as the service names them (`maxLen` ->
 * `max_len`), those left undefined or null not sent, lists comma-separated as in a query. */
async function sideOf(table, name) {
  if (table === null || typeof table !== "object" || Array.isArray(table)) {
    throw new TypeError(`${name} must be an object: {family, parameters} or {family, config}`);
  }
  const { config, parameters = {}, ...rest } = table;
  const side = { ...rest, parameters: {} };
  for (const [key, value] of Object.entries(parameters ?? {})) {
    if (value === undefined || value === null) continue;
    const listed = Array.isArray(value) || ArrayBuffer.isView(value);
    side.parameters[snake(key)] = listed ? Array.from(value).join(",") : value;
  }
  if (config !== undefined && config !== null) {
    const text = typeof Blob !== "undefined" && config instanceof Blob ? await config.text() : null;
    side.config = configObject(text ?? config);
  }
  return side;
}

/** Position ids, or a posted table's rows (numbers, bigints, typed arrays, nested to any
 * depth), as JSON arrays. */
function idsOf(ids) {
  if (typeof ids === "number" || typeof ids === "bigint") return Number(ids);
  return Array.from(ids, idsOf);
}

/** A header's comma-separated names (X-Layer-Types, X-Config-Fields), each
 * percent-decoded; null when the answer has no such header. */
function isTensor(value) {
  return typeof value === "object" && value !== null && Array.isArray(value.shape) &&
    ArrayBuffer.isView(value.data);
}

/** A posted table (`POST /v1/verify`, `/v1/identify`) as a JSON document: `{cos, sin}` or
 * `{data}` (or one tensor, read as `{data}`), each array rows of numbers or a tensor as the
 * client decodes them; `dtype` the tensors' unless given (the service's default, float32,
 * for rows of numbers); `start` and the position ids, one a row, where given. */
function postedTable(table, { start, positionIds, position_ids, dtype }) {
  if (table === null || typeof table !== "object" || Array.isArray(table)) {
    throw new TypeError("table must be {cos, sin} or {data}: rows of numbers, or tensors");
  }
  const members = isTensor(table) ? { data: table } : table;
  const unknown = Object.keys(members).find((name) => !["cos", "sin", "data"].includes(name));
  if (unknown !== undefined) throw new TypeError(`table: ${unknown} is not cos, sin or data`);
  const document = {};
  let found = dtype;
  for (const [name, value] of Object.entries(members)) {
    if (value === undefined || value === null) continue;
    if (isTensor(value)) {
      document[name] = nested(valuesOf(value), value.shape);
      found ??= value.dtype;
    } else {
      document[name] = idsOf(value);
    }
  }
  if (found !== undefined) document.dtype = found;
  if (start !== undefined) document.start = start;
  const ids = positionIds ?? position_ids;
  if (ids !== undefined && ids !== null) document.position_ids = idsOf(ids);
  return document;
}

function namesOf(header) {
  if (header === null || header === undefined) return null;
  return header
    .split(",")
    .map((name) => decodeURIComponent(name.trim()))
    .filter(Boolean);
}

function halves(stacked) {
  const shape = stacked.shape.slice(1);
  const size = elements(shape);
  const part = (i) => ({
    data: stacked.data.subarray(i * size, (i + 1) * size),
    shape: [...shape],
    dtype: stacked.dtype,
  });
  return { cos: part(0), sin: part(1) };
}

/** A rotary answer as `{cos, sin}`: safetensors' two tensors (and its metadata), else the
 * two halves of the stacked `[2, ..., rotaryDim]`. */
function cosSin(answer) {
  if (answer.tensors) {
    const { cos, sin } = answer.tensors;
    if (!cos || !sin) {
      const names = Object.keys(answer.tensors);
      const hint = names.some((name) => name.includes("/"))
        ? " (a table per layer type: give layerType, or call rotaryLayers)"
        : "";
      throw new TypeError(`expected tensors cos and sin, got ${names.join(", ")}${hint}`);
    }
    return { cos, sin, metadata: answer.metadata };
  }
  return halves(answer);
}

/** The `{cos, sin}` of each table of a safetensors answer: tensors `NAME/cos` and
 * `NAME/sin` by NAME; a single table's `cos` and `sin` under `one`. */
function tablesOf(tensors, one = "") {
  const grouped = {};
  for (const [name, tensor] of Object.entries(tensors)) {
    const slash = name.lastIndexOf("/");
    const table = slash < 0 ? one : name.slice(0, slash);
    (grouped[table] ??= {})[name.slice(slash + 1)] = tensor;
  }
  const tables = Object.entries(grouped);
  if (tables.length === 0 || tables.some(([, named]) => !named.cos || !named.sin)) {
    throw new TypeError(`expected tensors cos and sin of each table: ${Object.keys(tensors)}`);
  }
  return Object.fromEntries(tables.map(([name, { cos, sin }]) => [name, { cos, sin }]));
}

/** A one-column table `[rows, 1]` as `[rows]` (the same data). */
function column(tensor) {
  return { ...tensor, shape: [tensor.shape[0]] };
}

/** The service over HTTP. Parameters are the query string's, in camelCase (`maxLen`) or
 * as the service names them (`max_len`); arrays are sent comma-separated. */
export class Client {
  constructor(baseUrl, { fetch: fetchImpl, headers = {}, timeout } = {}) {
    this.baseUrl = baseUrl ?? globalThis.location?.origin ?? "http://127.0.0.1:8000";
    this.fetch = fetchImpl ?? globalThis.fetch.bind(globalThis);
    this.headers = headers;
    this.timeout = timeout;
  }

  async request(method, path, params = {}, { body, headers = {} } = {}) {
    const url = new URL(path, this.baseUrl);
    url.search = queryOf(params).toString();
    const signal = this.timeout ? AbortSignal.timeout(this.timeout) : undefined;
    const response = await this.fetch(url, {
      method,
      body,
      headers: { ...this.headers, ...headers },
      signal,
    });
    if (response.status >= 400) {
      const text = await response.text();
      let problem;
      try {
        problem = JSON.parse(text);
      } catch {
        problem = null;
      }
      if (problem === null || typeof problem !== "object") {
        problem = { title: response.statusText, status: response.status, detail: text };
      }
      throw new ProblemError(response.status, problem);
    }
    return response;
  }

  async tensor(method, path, params, init) {
    return (await this.tensorAnswer(method, path, params, init)).decoded;
  }

  /** The decoded answer and its headers. */
  async tensorAnswer(method, path, params, init) {
    const format = params.format ?? "raw";
    if (!FORMATS.includes(format)) throw new TypeError(`format must be one of ${FORMATS}`);
    const response = await this.request(method, path, { ...params, format }, init);
    const decoded = decode(format, await response.arrayBuffer(), response.headers);
    return { decoded, headers: response.headers };
  }

  /** Any family's table, `GET /v1/encodings/{family}`, by the parameters its query string
   * takes (`maxLen` where it takes one); a safetensors answer is returned whole
   * (`{tensors, metadata}`). */
  async encoding(family, params = {}) {
    return this.tensor("GET", `/v1/encodings/${family}`, params);
  }

  /** The sinusoidal table (`maxLen`, `dModel`, `base`, `layout`, `dtype`, `preset`, ...). */
  async table(params) {
    return only(await this.encoding("sinusoidal", params));
  }

  /** The rotary (RoPE) tables `{cos, sin}`, each `[rows, rotaryDim]`. */
  async rotary(params) {
    return cosSin(await this.encoding("rotary", params));
  }

  /** A model's rotary tables `{cos, sin}` from its Hugging Face config.json (an object,
   * JSON text, or its bytes: under Node, `await readFile("config.json")`), as `rotary`
   * gives them. `maxLen` defaults to the config's `max_position_embeddings`; `maxLen`,
   * `start`, `stop`, `convention`, `rounding` and `dtype` given here override the config;
   * `layerType` names the table where its rope parameters are per layer type. */
  async fromConfig(config, params = {}) {
    const init = { body: configBody(config), headers: { "content-type": "application/json" } };
    const path = "/v1/encodings/rotary/from-config";
    return cosSin(await this.tensor("POST", path, params, init));
  }

  /** A model's rotary tables by layer type (Gemma 3 and 4 have one per type):
   * `{tables: {name: {cos, sin}}, layerTypes, configFields}`, `layerTypes` the type of each
   * layer (null when the config has none) and `configFields` the config's fields read. A
   * config with one set of rope parameters gives one table, named "" (or the `layerType`
   * asked for). The config and `params` as `fromConfig` takes them; the answer travels as
   * safetensors. */
  async rotaryLayers(config, params = {}) {
    const init = { body: configBody(config), headers: { "content-type": "application/json" } };
    const path = "/v1/encodings/rotary/from-config";
    const asked = { ...params, format: "safetensors" };
    const { decoded, headers } = await this.tensorAnswer("POST", path, asked, init);
    const one = params.layerType ?? params.layer_type ?? "";
    return {
      tables: tablesOf(decoded.tensors, one),
      layerTypes: namesOf(headers.get("x-layer-types")),
      configFields: namesOf(headers.get("x-config-fields")) ?? [],
    };
  }

  /** The rotary tables `{cos, sin}` at position ids (`[L]` or `[batch][L]`; with
   * `mropeSection`, e.g. `[16, 24, 24]`, M-RoPE's `[3][L]` or `[3][batch][L]`), each
   * `[..., L, rotaryDim]`; `params` as `rotary` takes them (`maxLen`, `headDim`, ...). The
   * ids are posted as JSON. */
  async rotaryPositions(positionIds, params) {
    const body = JSON.stringify({ position_ids: idsOf(positionIds) });
    const init = { body, headers: { "content-type": "application/json" } };
    return cosSin(await this.tensor("POST", "/v1/encodings/rotary/positions", params, init));
  }

  /** M-RoPE's position ids and rope delta for a sequence of `segments` (`{text: 5}`,
   * `{image: [t, h, w]}`, `{video: [t, h, w], seconds_per_grid: 1, frame_text: 2}`), as
   * Qwen2-VL's, Qwen2.5-VL's or Qwen3-VL's get_rope_index: `{positionIds: [t, h, w] rows of
   * L numbers, ropeDelta, length, model, spatialMergeSize, tokensPerSecond}`. `params`:
   * `model`, `spatialMergeSize`, `tokensPerSecond`, `config` (a config.json, whose settings
   * those override). */
  async mropePositions(segments, params = {}) {
    const document = { segments };
    for (const [name, value] of Object.entries(params)) {
      if (value === undefined || value === null) continue;
      document[snake(name)] = name === "config" ? configObject(value) : value;
    }
    const init = {
      body: jsonOf(document, "layout"),
      headers: { "content-type": "application/json" },
    };
    const response = await this.request("POST", "/v1/positions/mrope", { format: "json" }, init);
    const answer = await response.json();
    return {
      positionIds: answer.position_ids,
      ropeDelta: answer.rope_delta,
      length: answer.length,
      model: answer.model,
      spatialMergeSize: answer.spatial_merge_size,
      tokensPerSecond: answer.tokens_per_second,
    };
  }

  /** Llama 4's query scale by position on its layers without RoPE, `[rows]`:
   * log1p(floor((p + 1) / floorScale)) * attnScale + 1. */
  async temperature(params) {
    return column(only(await this.tensor("GET", "/v1/encodings/temperature", params)));
  }

  /** Llama 4's query scales from its config.json (as `fromConfig` takes it):
   * `{scales: [rows], layerTypes}`, `layerTypes` each layer's kind, "rope" or "nope" (the
   * layers the scales are for), null where the config does not say. */
  async temperatureFromConfig(config, params = {}) {
    const init = { body: configBody(config), headers: { "content-type": "application/json" } };
    const path = "/v1/encodings/temperature/from-config";
    const { decoded, headers } = await this.tensorAnswer("POST", path, params, init);
    return { scales: column(only(decoded)), layerTypes: namesOf(headers.get("x-layer-types")) };
  }

  /** Diffusion timestep embeddings of timesteps 0 .. maxLen-1, `[rows, dim]`: diffusers'
   * get_timestep_embedding under its parameters' names (`flipSinToCos`,
   * `downscaleFreqShift`, `scale`, `maxPeriod`), FLUX's `timeFactor`, `timestepDtype`, or
   * a model's `preset` ("unet", "flux", "wan", ...). */
  async timestep(params) {
    return only(await this.encoding("timestep", params));
  }

  /** The timestep embeddings of any finite timesteps `[N]` (the scheduler's: σ·1000 for
   * the flow-matching models), `[N, dim]`; `params` as `timestep` takes them (`maxLen` 1 unless
   * given: the table's, unused at posted timesteps). */
  async timestepPositions(timesteps, params) {
    const body = JSON.stringify({ position_ids: idsOf(timesteps) });
    const init = { body, headers: { "content-type": "application/json" } };
    const path = "/v1/encodings/timestep/positions";
    return only(await this.tensor("POST", path, { maxLen: 1, ...params }, init));
  }

  /** A diffusers model's timestep embeddings `[rows, width]` from its config.json (its
   * `_class_name`: the UNets, FLUX, SD3, PixArt, Wan, ...), as `fromConfig` takes it. */
  async timestepFromConfig(config, params) {
    const init = { body: configBody(config), headers: { "content-type": "application/json" } };
    const path = "/v1/encodings/timestep/from-config";
    return only(await this.tensor("POST", path, params, init));
  }

  /** The 2-D sin-cos table of a `height` × `width` patch grid, `[extraTokens + height ·
   * width, dim]`, a row a token (row-major): a `preset` ("mae", the default; "diffusers",
   * "sd3", "timm") and the parameters it takes (`extraTokens`, `baseSize`,
   * `interpolationScale`, `posEmbedMaxSize`, `temperature`, `interleaveSinCos`,
   * `reverseCoord`). */
  async sincos2d(params) {
    return only(await this.encoding("sincos-2d", params));
  }

  /** The 3-D sin-cos table of a `frames` × `height` × `width` patch grid, `[textTokens +
   * frames · height · width, dim]` (diffusers' get_3d_sincos_pos_embed; preset
   * "cogvideox": CogVideoX-2b's). */
  async sincos3d(params) {
    return only(await this.encoding("sincos-3d", params));
  }

  /** A diffusers model's 2-D sin-cos table from its config.json (SD3, PixArt, DiT, Latte),
   * for a picture of `height` × `width` pixels (default the config's). */
  async sincos2dFromConfig(config, params = {}) {
    const init = { body: configBody(config), headers: { "content-type": "application/json" } };
    return only(await this.tensor("POST", "/v1/encodings/sincos-2d/from-config", params, init));
  }

  /** CogVideoX's 3-D sin-cos table from its config.json, for a video of `frames` frames of
   * `height` × `width` pixels (default the config's). */
  async sincos3dFromConfig(config, params = {}) {
    const init = { body: configBody(config), headers: { "content-type": "application/json" } };
    return only(await this.tensor("POST", "/v1/encodings/sincos-3d/from-config", params, init));
  }

  /** Multi-axis RoPE of a diffusion transformer `{cos, sin}`, each `[tokens, headDim]`:
   * the latent `grid` in patches (`[H, W]`, `[T, H, W]`), the `textTokens` first, as a
   * model's `preset` ("flux", "flux2", "hunyuan-video", "wan", ...) or diffusers'
   * get_1d_rotary_pos_embed per axis (`axesDim`, `theta`, `freqsDtype`) computes them. */
  async ropeNd(params) {
    return cosSin(await this.encoding("rope-nd", params));
  }

  /** `{cos, sin}` at `ids` of every axis (`[axes][L]`, any finite numbers), `[L, headDim]`
   * each; `params` as `ropeNd` takes them (`grid`: any of the preset's shape). */
  async ropeNdPositions(ids, params) {
    const body = JSON.stringify({ position_ids: idsOf(ids) });
    const init = { body, headers: { "content-type": "application/json" } };
    return cosSin(await this.tensor("POST", "/v1/encodings/rope-nd/positions", params, init));
  }

  /** Queries or keys `[B, heads, L, headDim]` rotated by the table of their L tokens, as
   * diffusers' apply_rotary_emb (`arithmetic: "float64"`: Wan2.1's rope_apply). */
  async ropeNdApply(tensor, params) {
    return this.applyTo("/v1/encodings/rope-nd/apply", tensor, params);
  }

  /** A diffusers transformer's multi-axis RoPE `{cos, sin}` from its config.json (FLUX,
   * FLUX.2, Qwen-Image, HunyuanVideo, Wan) over an image or video of `height` x `width`
   * pixels (`frames`). */
  async ropeNdFromConfig(config, params) {
    const init = { body: configBody(config), headers: { "content-type": "application/json" } };
    return cosSin(await this.tensor("POST", "/v1/encodings/rope-nd/from-config", params, init));
  }

  /** A vision tower's 2-D RoPE `{cos, sin}`, each `[tokens, headDim]`: one row a patch
   * token of an image of `grid` patches (`[H, W]`, or `[T, H, W]` for Qwen-VL's frames) in
   * the `model`'s token order ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "pixtral", "llama4",
   * "dinov3", "eva02"), in the layout its apply reads; its checkpoint's parameters unless
   * given. */
  async visionRotary(params) {
    return cosSin(await this.encoding("vision-rotary", params));
  }

  /** `{cos, sin}` at patch `coordinates` (integers: rows then columns `[2][L]`, or a
   * `[row, column]` a token, `[L][2]`), `[L, headDim]` each; `params` as `visionRotary`
   * takes them. */
  async visionRotaryPositions(coordinates, params) {
    const body = JSON.stringify({ position_ids: idsOf(coordinates) });
    const init = { body, headers: { "content-type": "application/json" } };
    return cosSin(await this.tensor("POST", "/v1/encodings/vision-rotary/positions", params, init));
  }

  /** Queries or keys `[B, heads, L, headDim]` rotated by the table of the image's first L
   * tokens as the model's apply does (float32; rotate-half for Qwen-VL, Pixtral and DINOv3,
   * interleaved pairs for Llama 4 and EVA-02). */
  async visionRotaryApply(tensor, params) {
    return this.applyTo("/v1/encodings/vision-rotary/apply", tensor, params);
  }

  /** The ALiBi slopes of `numHeads` heads. */
  async alibiSlopes(params) {
    return only(await this.tensor("GET", "/v1/biases/alibi/slopes", params));
  }

  /** The ALiBi bias `[numHeads, rows, keyLen]`; masked entries are -Infinity. */
  async alibiBias(params) {
    return only(await this.tensor("GET", "/v1/biases/alibi", params));
  }

  /** `X * scale + PE[positions]` for a tensor `[L, dModel]` or `[batch, L, dModel]`. */
  async apply(tensor, params = {}) {
    return this.applyTo("/v1/encodings/sinusoidal/apply", tensor, params);
  }

  /** Queries or keys `[..., L, headDim]` rotated by their positions' angles. */
  async rotaryApply(tensor, params = {}) {
    return this.applyTo("/v1/encodings/rotary/apply", tensor, params);
  }

  async applyTo(path, tensor, { positionIds, position_ids, body = "raw", ...params }) {
    const ids = positionIds ?? position_ids;
    let init;
    if (ids !== undefined) {
      // raw bytes carry no position ids: they go with the batch as JSON
      const document = {
        embeddings: nested(valuesOf(tensor), tensor.shape),
        position_ids: Array.from(ids, (row) => (typeof row === "number" ? row : Array.from(row))),
        dtype: tensor.dtype,
      };
      init = { body: JSON.stringify(document), headers: { "content-type": "application/json" } };
    } else if (body === "npy") {
      init = { body: encodeNpy(tensor), headers: { "content-type": "application/x-npy" } };
    } else {
      const { data, shape, dtype } = tensor;
      init = {
        body: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
        headers: {
          "content-type": "application/octet-stream",
          "x-shape": shape.join(","),
          "x-dtype": dtype,
        },
      };
    }
    return only(await this.tensor("POST", path, params, init));
  }

  /** How far each computation path's `family` table ("rotary", "sinusoidal",
   * "temperature") is from the exact one, by position band (`GET /v1/audit/{family}`): the
   * service's JSON document, `{family, parameters, reference, thresholds,
   * every_position_below, exact_below, paths: [{name, description, bands, first_over,
   * ...}]}`. `params`: the table's (`maxLen`, `headDim`, `base`, ...; not its rows, columns,
   * dtype or rounding), `paths` (names, picked and ordered) and `bands` (edges). */
  async audit(family, params = {}) {
    const path = `/v1/audit/${family}`;
    return (await this.request("GET", path, { ...params, format: "json" })).json();
  }

  /** The audit of `audit` drawn, error against position (log-log): the PNG's bytes. */
  async auditPng(family, params = {}) {
    const path = `/v1/audit/${family}`;
    const response = await this.request("GET", path, { ...params, format: "png" });
    const kind = (response.headers.get("content-type") ?? "").split(";")[0].trim();
    if (kind !== "image/png") throw new TypeError(`expected an image/png answer, got ${kind}`);
    return new Uint8Array(await response.arrayBuffer());
  }

  /** Tables `a` and `b` side by side over positions `start .. stop-1` (`POST
   * /v1/compare`), each `{family, parameters}` (the GET's parameters) or `{family, config,
   * parameters}` (a config.json as `fromConfig` takes it, and from-config's parameters):
   * the service's `{start, stop, bands: [{start, stop, samples, max_difference,
   * mean_difference, max_angle_drift (rotary)}], first_over: {"1e-3": ...}}`. */
  async compare(a, b, { start = 0, stop } = {}) {
    const document = { a: await sideOf(a, "a"), b: await sideOf(b, "b"), start, stop };
    const init = {
      body: jsonOf(document, "comparison"),
      headers: { "content-type": "application/json" },
    };
    return (await this.request("POST", "/v1/compare", {}, init)).json();
  }

  /** Whether `table` (`{cos, sin}` or `{data}`: rows of numbers, or tensors) is what
   * `family`'s GET with `parameters` gives (or a model's `config`, as `fromConfig` takes
   * it, with from-config's `parameters`; its family "rotary" unless named) at positions
   * `start`, `start + 1`, ... (or at `positionIds`, one a row), and if not, which known
   * mistake makes it (`POST /v1/verify`): the service's `{match, claim, rows, bands,
   * first_over, first_wrong_way, non_finite, diagnoses: [{mistake, description,
   * from_position, max_error, family, parameters, by}]}`. */
  async verify(table, { family, parameters = {}, config, ...posted } = {}) {
    const named = family ?? (config === undefined || config === null ? undefined : "rotary");
    const claim = await sideOf({ family: named, parameters, config }, "claim");
    return this.posted("/v1/verify", { ...claim, ...postedTable(table, posted) });
  }

  /** The GET requests that reproduce `table` (as `verify` takes it), best first, with no
   * claim (`POST /v1/identify`): the service's `{matched, tried, candidates: [{family,
   * parameters, match, max_error, bands, first_over}], read: {rows, width, pairing, base,
   * attention_factor}}`. */
  async identify(table, posted = {}) {
    return this.posted("/v1/identify", postedTable(table, posted));
  }

  async posted(path, document) {
    const init = {
      body: jsonOf(document, "table"),
      headers: { "content-type": "application/json" },
    };
    return (await this.request("POST", path, {}, init)).json();
  }

  /** A family's presets (`GET /v1/presets`; the sinusoidal ones by default), each with
   * the code it follows; none for a family without presets. */
  async presets(family = "sinusoidal") {
    const document = await (await this.request("GET", "/v1/presets")).json();
    return family === "sinusoidal" ? document.presets : (document.families[family] ?? []);
  }

  /** The service's cache statistics. */
  async cacheStats() {
    return (await this.request("GET", "/v1/cache")).json();
  }

  /** Whether the service answers `/readyz` with 200. */
  async ready() {
    try {
      await this.request("GET", "/readyz");
      return true;
    } catch (error) {
      if (error instanceof ProblemError) return false;
      throw error;
    }
  }
}
