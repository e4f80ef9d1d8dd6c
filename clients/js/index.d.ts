// Types of the positional-encoding service's JavaScript client (index.js).

/** Element types the service serves and takes. */
export type DType = "float32" | "float64" | "float16";

/** The typed array a dtype is held in: float16 as its IEEE half-precision bits (there is no
 * Float16Array in Node 20); `float16ToFloat32` or `valuesOf` gives their values. */
export interface DataOf {
  float32: Float32Array;
  float64: Float64Array;
  float16: Uint16Array;
}

/** A C-order array: `data[i0 * shape[1] * ... + ...]`. */
export interface Tensor<D extends DType = DType> {
  data: DataOf[D];
  shape: number[];
  dtype: D;
  /** safetensors answers: the `__metadata__` (the table's parameters, as strings). */
  metadata?: Record<string, string>;
}

/** A decoded safetensors file. */
export interface Safetensors {
  tensors: Record<string, Tensor>;
  metadata: Record<string, string>;
}

/** The wire format of a table: raw little-endian bytes (the default), .npy or safetensors. */
export type TableFormat = "raw" | "npy" | "safetensors";

/** A query parameter: numbers, words, booleans, or lists (sent comma-separated). */
export type Value = string | number | boolean | readonly number[] | undefined | null;

/** Parameters in camelCase (`maxLen`) or the service's own names (`max_len`). */
export interface Params {
  format?: TableFormat;
  [name: string]: Value;
}

export interface TableParams extends Params {
  maxLen: number;
  dModel: number;
  base?: number;
  layout?: "interleaved" | "split";
  dtype?: DType;
  preset?: string;
  rounding?: "library" | "exact";
  start?: number;
  stop?: number;
  dimStart?: number;
  dimStop?: number;
}

export interface RotaryParams extends Params {
  maxLen: number;
  headDim: number;
  base?: number;
  convention?: "half" | "interleaved";
  scaling?: "none" | "linear" | "ntk" | "dynamic" | "yarn" | "longrope" | "llama3";
  partialRotaryFactor?: number;
  rounding?: "library" | "exact";
  dtype?: DType;
  start?: number;
  stop?: number;
}

/** What a config.json does not say (these override what it does). */
export interface FromConfigParams extends Params {
  /** Default: the config's max_position_embeddings (required when it has none). */
  maxLen?: number;
  start?: number;
  stop?: number;
  convention?: "half" | "interleaved";
  rounding?: "library" | "exact";
  dtype?: DType;
}

/** A model's Hugging Face config.json: parsed, as JSON text, or its bytes. */
export type Config = Record<string, unknown> | string | ArrayBuffer | ArrayBufferView | Blob;

/** Rotary (RoPE) tables, each `[rows, rotaryDim]`. */
export interface CosSin {
  cos: Tensor;
  sin: Tensor;
  /** safetensors answers: the table's parameters, as strings. */
  metadata?: Record<string, string>;
}

/** A parameter a preset takes, with its default and bounds. */
export interface PresetParameter {
  name: string;
  default: unknown;
  description: string;
  [field: string]: unknown;
}

/** A sinusoidal preset as `GET /v1/presets` lists it; the service documents its fields. */
export interface Preset {
  name: string;
  summary: string;
  formula: string;
  parameters: PresetParameter[];
  [field: string]: any;
}

export interface SlopesParams extends Params {
  numHeads: number;
  dtype?: DType;
  rounding?: "library" | "exact";
}

export interface BiasParams extends SlopesParams {
  maxLen: number;
  keyLen?: number;
  form?: "causal" | "bloom" | "symmetric";
  start?: number;
  stop?: number;
}

/** Positions `[L]` or `[batch][L]`. */
export type PositionIds = ArrayLike<number> | ArrayLike<ArrayLike<number>>;

export interface ApplyParams {
  /** Positions of the rows; the batch then travels as JSON (raw bytes carry none). */
  positionIds?: PositionIds;
  position_ids?: PositionIds;
  format?: TableFormat;
  /** How the batch travels without position ids: raw bytes (the default) or .npy. */
  body?: "raw" | "npy";
  offset?: number;
  maxLen?: number;
  /** sinusoidal: the factor on the embeddings (default the preset's, sqrt(dModel)). */
  scale?: number;
  /** The family's other parameters (`base`, `preset`, `convention`, `scaling`, ...). */
  [name: string]: Value | PositionIds;
}

/** An error answer: its status and RFC 9457 problem document. */
export class ProblemError extends Error {
  constructor(status: number, problem: Record<string, unknown>);
  status: number;
  problem: Record<string, any>;
  type: string;
  title: string;
  detail: string;
}

export interface ClientOptions {
  /** Another fetch (a proxy's, a test's); default `globalThis.fetch`. */
  fetch?: typeof fetch;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
  /** Milliseconds before a request is aborted. */
  timeout?: number;
}

export class Client {
  /** `baseUrl` defaults to the page's origin in a browser, else http://127.0.0.1:8000. */
  constructor(baseUrl?: string, options?: ClientOptions);
  baseUrl: string;
  request(
    method: string,
    path: string,
    params?: Params,
    init?: { body?: BodyInit; headers?: Record<string, string> },
  ): Promise<Response>;
  /** Any family's table; `maxLen` only where the family takes one. */
  encoding(family: string, params?: Params): Promise<Tensor | Safetensors>;
  table(params: TableParams): Promise<Tensor>;
  rotary(params: RotaryParams): Promise<CosSin>;
  /** `POST /v1/encodings/rotary/from-config`: the tables of a model from its config.json. */
  fromConfig(config: Config, params?: FromConfigParams): Promise<CosSin>;
  alibiSlopes(params: SlopesParams): Promise<Tensor>;
  alibiBias(params: BiasParams): Promise<Tensor>;
  apply(tensor: Tensor, params?: ApplyParams): Promise<Tensor>;
  rotaryApply(tensor: Tensor, params?: ApplyParams): Promise<Tensor>;
  presets(): Promise<Preset[]>;
  cacheStats(): Promise<Record<string, any>>;
  ready(): Promise<boolean>;
}

export function decodeRaw(
  bytes: ArrayBuffer | ArrayBufferView,
  headers: Headers | { shape: number[]; dtype: DType },
): Tensor;
export function decodeNpy(bytes: ArrayBuffer | ArrayBufferView): Tensor;
export function decodeSafetensors(bytes: ArrayBuffer | ArrayBufferView): Safetensors;
export function encodeNpy(tensor: Tensor): Uint8Array;
export function float16ToFloat32(bits: Uint16Array): Float32Array;
export function valuesOf(tensor: Tensor): Float32Array | Float64Array;
