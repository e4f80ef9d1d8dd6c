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

/** Whose tables: transformers' (the default), or vLLM's where it computes a scaling
 * otherwise; the dtype the engine keeps them in (each entry rounded to it). */
export interface EngineParams {
  engine?: "transformers" | "vllm";
  /** engine "vllm" with longrope: the deployment's context. */
  maxModelLen?: number;
  cacheDtype?: "float32" | "float16" | "bfloat16";
}

export interface RotaryParams extends Params, EngineParams {
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

/** The table's parameters, and M-RoPE's: the pairs the temporal, height and width axes
 * turn (`[16, 24, 24]` or "16,24,24"), Qwen3-VL's interleaved layout. */
export interface RotaryPositionsParams extends RotaryParams {
  mropeSection?: readonly number[] | string;
  mropeInterleaved?: boolean;
}

/** Position ids: `[L]`, `[batch][L]`, M-RoPE's `[3][L]` or `[3][batch][L]`. */
export type Ids =
  | ArrayLike<number | bigint>
  | ArrayLike<ArrayLike<number | bigint>>
  | ArrayLike<ArrayLike<ArrayLike<number | bigint>>>;

/** One run of a sequence: text tokens, or one image's or video's grid `[t, h, w]` in
 * patches (as image_grid_thw, video_grid_thw). */
export interface Segment {
  text?: number;
  image?: ArrayLike<number>;
  video?: ArrayLike<number>;
  /** Qwen2.5-VL: a video's seconds per temporal grid (default 1). */
  seconds_per_grid?: number;
  /** Qwen3-VL: the text tokens between a video's frames. */
  frame_text?: number;
}

export interface MropeParams {
  /** Default: the config's model_type, else qwen2_5_vl with tokensPerSecond, else qwen2_vl. */
  model?: "qwen2_vl" | "qwen2_5_vl" | "qwen3_vl";
  spatialMergeSize?: number;
  tokensPerSecond?: number | null;
  /** A model's config.json (parsed, JSON text or its bytes); the settings above override it. */
  config?: Record<string, unknown> | string | ArrayBuffer | ArrayBufferView;
}

/** M-RoPE's position ids for a layout, and what made them. */
export interface MropePositions {
  /** The temporal, height and width rows, each of `length` ids. */
  positionIds: [number[], number[], number[]];
  /** max id + 1 - length: the next token's ids are length + ropeDelta. */
  ropeDelta: number;
  length: number;
  model: string;
  spatialMergeSize: number;
  tokensPerSecond: number | null;
}

/** What a config.json does not say (these override what it does). */
export interface FromConfigParams extends Params, EngineParams {
  /** Default: the config's max_position_embeddings (required when it has none). */
  maxLen?: number;
  start?: number;
  stop?: number;
  convention?: "half" | "interleaved";
  rounding?: "library" | "exact";
  dtype?: DType;
  /** Where the rope parameters are per layer type (Gemma 3, 4): that type's table. */
  layerType?: string;
}

export interface TemperatureParams extends Params {
  maxLen: number;
  /** Llama 4's: 8192. */
  floorScale?: number;
  /** Llama 4's: 0.1. */
  attnScale?: number;
  start?: number;
  stop?: number;
  rounding?: "library" | "exact";
  dtype?: DType;
}

/** A diffusion timestep embedding's parameters, under diffusers' names; a preset fixes a
 * model's (only "diffusers" takes every one; every preset takes `timestepDtype`). */
export interface TimestepParams extends Params {
  maxLen: number;
  dim: number;
  preset?:
    | "diffusers"
    | "unet"
    | "guided-diffusion"
    | "ddpm"
    | "flux"
    | "flux-diffusers"
    | "wan"
    | "qwen-image";
  flipSinToCos?: boolean;
  downscaleFreqShift?: number;
  scale?: number;
  maxPeriod?: number;
  timeFactor?: number;
  timestepDtype?: "float32" | "bfloat16" | "float16";
  start?: number;
  stop?: number;
  rounding?: "library" | "exact";
  dtype?: DType;
}

/** What a diffusers config.json does not say. */
export interface TimestepFromConfigParams extends Params {
  maxLen: number;
  start?: number;
  stop?: number;
  timestepDtype?: "float32" | "bfloat16" | "float16";
  rounding?: "library" | "exact";
  dtype?: DType;
}

/** A 2-D sin-cos table's grid (tokens), width and preset; each preset takes only its own
 * parameters (mae: extraTokens; diffusers: extraTokens, baseSize, interpolationScale; sd3:
 * baseSize, interpolationScale, posEmbedMaxSize; timm: temperature, interleaveSinCos,
 * reverseCoord). */
export interface Sincos2dParams extends Params {
  height: number;
  width: number;
  dim: number;
  preset?: "mae" | "diffusers" | "sd3" | "timm";
  extraTokens?: number;
  baseSize?: number;
  interpolationScale?: number;
  posEmbedMaxSize?: number;
  temperature?: number;
  interleaveSinCos?: boolean;
  reverseCoord?: boolean;
  start?: number;
  stop?: number;
  rounding?: "library" | "exact";
  dtype?: DType;
}

/** A 3-D sin-cos table's grid (tokens), width and preset (only "diffusers" takes the
 * scales and textTokens). */
export interface Sincos3dParams extends Params {
  frames: number;
  height: number;
  width: number;
  dim: number;
  preset?: "diffusers" | "cogvideox";
  spatialInterpolationScale?: number;
  temporalInterpolationScale?: number;
  textTokens?: number;
  start?: number;
  stop?: number;
  rounding?: "library" | "exact";
  dtype?: DType;
}

/** What a diffusers config.json does not say: the picture's size in pixels (and frames). */
export interface SincosFromConfigParams extends Params {
  frames?: number;
  height?: number;
  width?: number;
  start?: number;
  stop?: number;
  rounding?: "library" | "exact";
  dtype?: DType;
}

/** A multi-axis RoPE table's parameters; a preset fixes a model's (only "diffusers" takes
 * every one). */
export interface RopeNdParams extends Params {
  /** The latent grid in patches: [H, W] for images, [T, H, W] for video. */
  grid: number[] | string;
  preset?:
    | "diffusers"
    | "flux"
    | "flux-bfl"
    | "flux2"
    | "hunyuan-video"
    | "wan"
    | "cogvideox"
    | "cogvideox-1.5"
    | "qwen-image";
  /** cogvideox: the pipeline's base size in patches, [rows, columns] (30, 45). */
  baseGrid?: number[] | string;
  axesDim?: number[] | string;
  headDim?: number;
  theta?: number;
  freqsDtype?: "float32" | "float64";
  textTokens?: number;
  idsDtype?: "float32" | "bfloat16" | "float16";
  layout?: "interleaved" | "half";
  start?: number;
  stop?: number;
  rounding?: "library" | "exact";
  dtype?: DType;
}

/** A vision tower's 2-D RoPE table: the model, the image's grid, and what the model takes
 * (its checkpoint's by default; one it does not take is refused). */
export interface VisionRotaryParams extends Params {
  model: "qwen2_vl" | "qwen2_5_vl" | "qwen3_vl" | "pixtral" | "llama4" | "dinov3" | "eva02";
  /** The image's grid in patches: [H, W], or [T, H, W] for Qwen-VL's frames. */
  grid: number[] | string;
  headDim?: number;
  theta?: number;
  /** Qwen-VL: the side of the blocks of patches its merger joins (2). */
  spatialMergeSize?: number;
  /** qwen2_5_vl: rows in its windowed attention's order; windowSize, patchSize in pixels. */
  windowIndex?: boolean;
  windowSize?: number;
  patchSize?: number;
  /** dinov3: transformers, original or timm; eva02: timm. */
  implementation?: "transformers" | "original" | "timm";
  normalizeCoords?: "separate" | "min" | "max";
  periodsDtype?: "float32" | "bfloat16";
  /** eva02: the pre-training grid positions are rescaled to, [rows, columns]. */
  refFeatShape?: number[] | string;
  gridOffset?: number;
  start?: number;
  stop?: number;
  rounding?: "library" | "exact";
  dtype?: DType;
}

/** What a diffusers transformer's config.json does not say: the image's size in pixels. */
export interface RopeNdFromConfigParams extends Params {
  height: number;
  width: number;
  frames?: number;
  textTokens?: number;
  idsDtype?: "float32" | "bfloat16" | "float16";
  layout?: "interleaved" | "half";
  start?: number;
  stop?: number;
  rounding?: "library" | "exact";
  dtype?: DType;
}

/** What a Llama 4 config.json does not say. */
export interface TemperatureFromConfigParams extends Params {
  /** Default: the config's max_position_embeddings. */
  maxLen?: number;
  start?: number;
  stop?: number;
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

/** A model's rotary tables by layer type. */
export interface RotaryLayers {
  /** Each layer type's tables; a config of one set of rope parameters: one, named "" (or
   * the layerType asked for). */
  tables: Record<string, CosSin>;
  /** The type of each layer, in order; null when the config has none. */
  layerTypes: string[] | null;
  /** The config's fields the service read. */
  configFields: string[];
}

/** Llama 4's query scales and which layers they are for. */
export interface Temperature {
  /** `[rows]`. */
  scales: Tensor;
  /** Each layer's kind: "rope", or "nope" (no RoPE: the scales are for these); null when
   * the config does not say. */
  layerTypes: string[] | null;
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

/** Another family's preset as `GET /v1/presets` lists it under `families`. */
export interface FamilyPreset {
  name: string;
  summary: string;
  follows: { repository: string; version: string; path: string; function: string }[];
  fixes: Record<string, unknown>;
  takes: string[];
  library_rounding: string;
  rows: string;
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

/** A family's name as the service's paths say it (an audit, a comparison's tables): the
 * service's own, or any other it lists (its OpenAPI document), so a family added to the
 * service needs no new client. `string & {}` keeps the known names offered by editors. */
export type Family = "rotary" | "sinusoidal" | "temperature" | "alibi" | (string & {});

/** An audit's parameters: the table's, as its GET takes them (`maxLen`, `headDim`, `base`,
 * `scaling`, ...; `dModel`, `preset`, ... for sinusoidal), less the rows, columns, dtype and
 * rounding; which paths, and where the bands end. */
export interface AuditParams {
  maxLen: number;
  /** Names, picked and ordered (default every one that applies): library, bf16-table,
   * fp16-table, float32-positions, bf16-positions, fp16-positions; rotary:
   * bf16-frequencies, tf32-angles, device. An array, or "a,b". */
  paths?: readonly string[] | string;
  /** Band edges, positions (at most 64; default powers of two). */
  bands?: readonly number[] | string;
  [name: string]: Value | readonly string[];
}

/** One band of positions `start .. stop-1`, `samples` of them measured. */
export interface AuditBand {
  start: number;
  stop: number;
  samples: number;
  max_error: number;
  mean_error: number;
}

/** The first position past each threshold ("1e-3", "1e-2", "1e-1"); null: none. */
export type FirstOver = Record<string, number | null>;

/** One computation path's error against the exact table. */
export interface AuditPath {
  name: string;
  description: string;
  bands: AuditBand[];
  first_over: FirstOver;
  /** rotary: the first position whose rotation points more than 90 degrees off. */
  first_misdirected?: number | null;
  [field: string]: unknown;
}

/** `GET /v1/audit/{family}`'s JSON document. */
export interface Audit {
  family: Family;
  /** The table's parameters as the service resolved them. */
  parameters: Record<string, unknown>;
  /** What the paths are measured against. */
  reference: string;
  thresholds: string[];
  every_position_below: number;
  exact_below: number;
  paths: AuditPath[];
  [field: string]: unknown;
}

/** One table of a comparison: a family and its GET's parameters, or a config.json (as
 * `fromConfig` takes it) and from-config's parameters (`maxLen`, `engine`, ...). */
export interface CompareTable {
  family: Family;
  /** camelCase or the service's names; undefined and null are not sent; arrays go
   * comma-separated, as in a query. */
  parameters?: Record<string, Value | ArrayLike<number>>;
  config?: Config | null;
}

export interface CompareRange {
  /** Default 0. */
  start?: number;
  stop: number;
}

/** The difference of two tables over one band of positions. */
export interface CompareBand {
  start: number;
  stop: number;
  samples: number;
  max_difference: number;
  mean_difference: number;
  /** rotary tables: the largest drift of a pair's angle, radians. */
  max_angle_drift?: number;
}

/** `POST /v1/compare`'s JSON document. */
export interface Comparison {
  start: number;
  stop: number;
  bands: CompareBand[];
  first_over: FirstOver;
  [field: string]: unknown;
}

/** A posted table's array: rows of numbers (arrays or typed arrays), or a tensor as the
 * client decodes them. */
export type Rows = ArrayLike<ArrayLike<number>> | Tensor;

/** A table to verify or identify: cos and sin, or one array (`[L, d]`, or rotary's
 * `[2, L, d]`, cos first, as its GET's stacked answer holds them), or one tensor. */
export type PostedTable =
  | { cos: Rows; sin: Rows }
  | { data: Rows | ArrayLike<ArrayLike<ArrayLike<number>>> }
  | Tensor;

export interface PostedParams {
  /** The position of the first row (default 0). */
  start?: number;
  /** The position of each row, instead of `start`. */
  positionIds?: ArrayLike<number>;
  /** The dtype the numbers are of: a tensor's own, else float32. */
  dtype?: "float32" | "float64" | "float16";
}

/** The claim a table is checked against: a family and its GET's parameters, or a model's
 * config.json (as `fromConfig` takes it; family "rotary" unless named) and from-config's. */
export interface VerifyParams extends PostedParams {
  family?: Family;
  /** camelCase or the service's names; arrays go comma-separated, as in a query. */
  parameters?: Record<string, Value | ArrayLike<number>>;
  config?: Config | null;
}

/** How close a table is: bit for bit, as the library computes it, as the claim rounded to
 * float16 or bfloat16, or none of these. */
export type Match = "bitwise" | "library" | "float16" | "bfloat16" | "different";

/** A posted table's difference from the claim over one band of positions. */
export interface VerifyBand {
  start: number;
  stop: number;
  rows: number;
  max_difference: number;
  mean_difference: number;
  /** rotary tables: the largest drift of a pair's angle, radians. */
  max_angle_drift?: number;
}

/** A known mistake that makes the posted table, and the GET that gives it. */
export interface Diagnosis {
  mistake: string;
  description: string;
  from_position: number | null;
  max_error: number;
  family: Family;
  parameters: Record<string, unknown>;
  /** "parameters" (the GET above gives the table), or the audit path or transform. */
  by: string;
  [field: string]: unknown;
}

/** `POST /v1/verify`'s JSON document. */
export interface Verification {
  match: Match;
  claim: { family: Family; parameters: Record<string, unknown> };
  rows: number;
  bands: VerifyBand[];
  first_over: FirstOver;
  first_wrong_way?: number | null;
  /** Where the posted table holds NaN or an infinity; null: nowhere. */
  non_finite: { entries: number; first_positions: number[] } | null;
  diagnoses: Diagnosis[];
  /** A table of another width than the claim's (its bands then empty). */
  shape?: { posted_width: number; claimed_width: number };
  [field: string]: unknown;
}

/** A GET that reproduces an identified table, or comes nearest. */
export interface Candidate {
  family: Family;
  parameters: Record<string, unknown>;
  match: Match;
  max_error: number;
  bands: VerifyBand[];
  first_over: FirstOver;
  [field: string]: unknown;
}

/** `POST /v1/identify`'s JSON document. */
export interface Identification {
  matched: boolean;
  tried: number;
  candidates: Candidate[];
  /** What the table itself says: its rows and width, its pairing, base and scale. */
  read: {
    rows: number;
    width: number;
    pairing: string | null;
    base: number | null;
    attention_factor: number | null;
    [field: string]: unknown;
  };
  [field: string]: unknown;
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
  /** Every layer type's tables from a config.json (format: always safetensors). */
  rotaryLayers(config: Config, params?: FromConfigParams): Promise<RotaryLayers>;
  /** `POST /v1/encodings/rotary/positions`: cos and sin at position ids (posted as JSON). */
  rotaryPositions(positionIds: Ids, params: RotaryPositionsParams): Promise<CosSin>;
  /** `POST /v1/positions/mrope`: M-RoPE's position ids for a layout (a JSON answer). */
  mropePositions(segments: Segment[], params?: MropeParams): Promise<MropePositions>;
  /** `GET /v1/encodings/temperature`: Llama 4's query scales, `[rows]`. */
  temperature(params: TemperatureParams): Promise<Tensor>;
  /** `POST /v1/encodings/temperature/from-config`. */
  temperatureFromConfig(config: Config, params?: TemperatureFromConfigParams): Promise<Temperature>;
  /** `GET /v1/encodings/timestep`: diffusion timestep embeddings, `[rows, dim]`. */
  timestep(params: TimestepParams): Promise<Tensor>;
  /** `POST /v1/encodings/timestep/positions`: at any finite timesteps, `[N, dim]`. */
  timestepPositions(
    timesteps: ArrayLike<number>,
    params: Omit<TimestepParams, "maxLen" | "start" | "stop"> & { maxLen?: number },
  ): Promise<Tensor>;
  /** `POST /v1/encodings/timestep/from-config`: a diffusers model's, from its config.json. */
  timestepFromConfig(config: Config, params: TimestepFromConfigParams): Promise<Tensor>;
  /** `GET /v1/encodings/sincos-2d`: a patch grid's 2-D sin-cos table, `[rows, dim]`. */
  sincos2d(params: Sincos2dParams): Promise<Tensor>;
  /** `GET /v1/encodings/sincos-3d`: a video grid's 3-D sin-cos table, `[rows, dim]`. */
  sincos3d(params: Sincos3dParams): Promise<Tensor>;
  /** `POST /v1/encodings/sincos-2d/from-config`: a diffusers model's, from its config.json. */
  sincos2dFromConfig(config: Config, params?: Omit<SincosFromConfigParams, "frames">): Promise<Tensor>;
  /** `POST /v1/encodings/sincos-3d/from-config`: CogVideoX's, from its config.json. */
  sincos3dFromConfig(config: Config, params?: SincosFromConfigParams): Promise<Tensor>;
  /** `GET /v1/encodings/rope-nd`: multi-axis RoPE, `{cos, sin}` each `[tokens, headDim]`. */
  ropeNd(params: RopeNdParams): Promise<CosSin>;
  /** `POST /v1/encodings/rope-nd/positions`: at ids `[axes][L]`, `{cos, sin}`. */
  ropeNdPositions(
    ids: ArrayLike<ArrayLike<number>>,
    params: Omit<RopeNdParams, "start" | "stop">,
  ): Promise<CosSin>;
  /** `POST /v1/encodings/rope-nd/apply`: `[B, heads, L, headDim]` rotated. */
  ropeNdApply(
    tensor: Tensor,
    params: Omit<RopeNdParams, "start" | "stop" | "dtype"> & {
      arithmetic?: "float32" | "float64";
      body?: "raw" | "npy";
    },
  ): Promise<Tensor>;
  /** `POST /v1/encodings/rope-nd/from-config`: a diffusers transformer's, from its config. */
  ropeNdFromConfig(config: Config, params: RopeNdFromConfigParams): Promise<CosSin>;
  /** `GET /v1/encodings/vision-rotary`: a vision tower's 2-D RoPE, `{cos, sin}` each
   * `[tokens, headDim]`. */
  visionRotary(params: VisionRotaryParams): Promise<CosSin>;
  /** `POST /v1/encodings/vision-rotary/positions`: at patch coordinates `[2][L]` or
   * `[L][2]`, `{cos, sin}`. */
  visionRotaryPositions(
    coordinates: ArrayLike<ArrayLike<number>>,
    params: Omit<VisionRotaryParams, "start" | "stop">,
  ): Promise<CosSin>;
  /** `POST /v1/encodings/vision-rotary/apply`: `[B, heads, L, headDim]` rotated. */
  visionRotaryApply(
    tensor: Tensor,
    params: Omit<VisionRotaryParams, "start" | "stop" | "dtype"> & { body?: "raw" | "npy" },
  ): Promise<Tensor>;
  alibiSlopes(params: SlopesParams): Promise<Tensor>;
  alibiBias(params: BiasParams): Promise<Tensor>;
  apply(tensor: Tensor, params?: ApplyParams): Promise<Tensor>;
  rotaryApply(tensor: Tensor, params?: ApplyParams & EngineParams): Promise<Tensor>;
  /** `GET /v1/audit/{family}`: each computation path's error by position band (JSON). */
  audit(family: Family, params: AuditParams): Promise<Audit>;
  /** `GET /v1/audit/{family}?format=png`: the audit drawn, the PNG's bytes. */
  auditPng(family: Family, params: AuditParams): Promise<Uint8Array>;
  /** `POST /v1/compare`: two tables' difference by position band. */
  compare(a: CompareTable, b: CompareTable, range: CompareRange): Promise<Comparison>;
  /** `POST /v1/verify`: a table against its claim, and the mistake that made it otherwise. */
  verify(table: PostedTable, params: VerifyParams): Promise<Verification>;
  /** `POST /v1/identify`: the GETs that reproduce a table, best first. */
  identify(table: PostedTable, params?: PostedParams): Promise<Identification>;
  /** `GET /v1/presets`: the sinusoidal presets, or another family's. */
  presets(): Promise<Preset[]>;
  presets(family: "sinusoidal"): Promise<Preset[]>;
  presets(family: string): Promise<FamilyPreset[]>;
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
