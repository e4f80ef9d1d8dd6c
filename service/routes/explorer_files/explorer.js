// The explorer: fetches a table from the service's raw endpoint (little-endian float32 with
// X-Shape) and draws it three ways on canvases. No libraries, no build step, no other host.
// This script is the sinusoidal view and the switch between views; it lends its helpers to
// the other views (rope.js, alibi.js, timestep.js, sincos.js, ropend.js, audit.js) as
// `window.explorer`, and starts once they registered. A table of sines and cosines is drawn
// by `drawGrid` (the heatmap; angles too, in `ANGLES`) and `drawColumns` (chosen columns as
// lines), whichever view fetched it.
// A table too long to hold is drawn from every step-th position (`sampling`), each fetched
// as a one-row slice, and the page says so. The curl commands a view offers keep within the
// service's PE_MAX_ELEMENTS, which the page is served with (`curlCommand`). A refused request
// takes down what the earlier one drew, in every view (`refuse`).
"use strict";

(() => {
  const TABLE = "/v1/encodings/sinusoidal";
  const MAX_ENTRIES = 1 << 22; // 16 MiB of float32: more would make the page sluggish
  // past MAX_ENTRIES, the positions drawn: half a canvas's width, fetched one row a request
  // (a few milliseconds each), FETCHES at a time: 1 to 4 s on a loaded 2-core machine
  const SAMPLES = 512;
  const FETCHES = 6;
  const PARAMS = ["max_len", "d_model", "base", "layout", "preset", "rounding"];
  // matplotlib's RdBu (ColorBrewer, 11 classes): -1 is dark red, +1 dark blue, like the PNGs
  const RDBU = [
    "#67001f", "#b2182b", "#d6604d", "#f4a582", "#fddbc7", "#f7f7f7",
    "#d1e5f0", "#92c5de", "#4393c3", "#2166ac", "#053061",
  ];
  // matplotlib's tab10, for the waves
  const LINES = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
  ];
  const MARGIN = { left: 58, right: 16, top: 12, bottom: 40 }; // CSS pixels
  // the service's PE_MAX_ELEMENTS, as it served the page (none said: no limit known)
  const MAX_ELEMENTS = Number(
    (document.querySelector('meta[name="pe-max-elements"]') || {}).content) || Infinity;
  const COLORBAR = 64; // CSS pixels on the heatmap's right

  // matplotlib's twilight_shifted: cyclic, so an angle of -pi and one of pi look alike
  const TWILIGHT = [
    "#301437", "#45135c", "#592a8f", "#5e51ad", "#6276ba", "#7297c1", "#95b5c7", "#c4ced4",
    "#e2d9e2", "#d8c7be", "#cca389", "#c27c63", "#b25652", "#983550", "#741e4f", "#4a1342",
  ];

  const $ = (id) => document.getElementById(id);
  const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  const LUT = colormap(RDBU, 256);
  // a heatmap's colours, range and colour bar's labels (top to bottom): a table's entries,
  // and angles (rope.js, ropend.js)
  const ENTRIES = { lut: LUT, low: -1, high: 1, labels: [["1", 0], ["0", 0.5], ["-1", 1]] };
  const ANGLES = {
    lut: colormap(TWILIGHT, 256), low: -Math.PI, high: Math.PI,
    labels: [["π", 0], ["π/2", 0.25], ["0", 0.5], ["−π/2", 0.75], ["−π", 1]],
  };

  // {params, rows, cols, table, step, total}: row r is position r × step of total
  let current = null;
  let presets = null; // name -> {base, layout}: whether the preset takes them (/v1/presets)
  let generation = 0;
  let pending = null;
  const views = {}; // name -> {show()}: the sinusoidal view, and those the other scripts add
  let active = "sinusoidal";
  // what an answer draws in this view, taken down when a request is refused (``refuse``)
  const DRAWN = {
    state: document.body, status: "status", problem: "problem",
    canvases: ["heatmap", "waves", "similarity"], emptied: ["legend"],
    hidden: ["sampling", "sinusoidal-links"],
  };

  // --- numbers -----------------------------------------------------------------------

  /** The shortest decimal that reads back as the same float32, as the JSON answers print. */
  function shortest(value) {
    if (!Number.isFinite(value)) return String(value);
    for (let digits = 1; digits <= 9; digits++) {
      const text = Number(value.toPrecision(digits));
      if (Math.fround(text) === value) return String(text);
    }
    return String(value);
  }

  function niceTicks(low, high, count) {
    const span = high - low;
    if (!(span > 0)) return [low];
    const raw = span / count;
    const power = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
    const ticks = [];
    for (let t = Math.ceil(low / step) * step; t <= high + step * 1e-9; t += step) {
      ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    }
    return ticks;
  }

  function tickText(value) {
    return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(4)));
  }

  function compact(value) {
    for (const [size, suffix] of [[1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
      if (Math.abs(value) >= size) return `${Number((value / size).toPrecision(3))}${suffix}`;
    }
    return String(Number(value.toPrecision(3)));
  }

  /** Ticks of a log axis: the powers of ten in range, with 2 and 5 times them when few. */
  function logTicks(low, high) {
    const ticks = [];
    for (const steps of [[1], [1, 2, 5], [1, 1.5, 2, 3, 5, 7]]) {
      ticks.length = 0;
      for (let e = Math.floor(Math.log10(low)); e <= Math.ceil(Math.log10(high)); e++) {
        for (const m of steps) {
          const t = m * 10 ** e;
          if (t >= low && t <= high) ticks.push(t);
        }
      }
      if (ticks.length >= 4) break;
    }
    return ticks;
  }

  function colormap(stops, size) {
    const rgb = stops.map((hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)));
    const lut = new Uint8ClampedArray(size * 3);
    for (let i = 0; i < size; i++) {
      const x = (i / (size - 1)) * (rgb.length - 1);
      const k = Math.min(Math.floor(x), rgb.length - 2);
      const f = x - k;
      for (let c = 0; c < 3; c++) lut[i * 3 + c] = rgb[k][c] + (rgb[k + 1][c] - rgb[k][c]) * f;
    }
    return lut;
  }

  // --- parameters and URLs ------------------------------------------------------------

  function readParams() {
    const params = {};
    for (const name of PARAMS) params[name] = $(name).value.trim();
    return params;
  }

  /** The parameters the chosen preset takes: the others would be refused (422). */
  function sent(params) {
    const takes = (presets && presets[params.preset]) || { base: true, layout: true };
    const names = ["max_len", "d_model"];
    if (takes.base) names.push("base");
    if (takes.layout) names.push("layout");
    if (params.preset !== "vaswani") names.push("preset", "rounding");
    return names;
  }

  function query(params, extra) {
    const search = new URLSearchParams();
    for (const name of sent(params)) search.set(name, params[name]);
    for (const [name, value] of Object.entries(extra || {})) search.set(name, value);
    return search.toString();
  }

  /** The curl command that saves the answer of rows ``start`` .. ``stop``-1, ``width``
   *  numbers each, at ``address(range)`` (a path and query; ``range`` null for the whole, else
   *  ``{start, stop}``) as ``file``: the whole answer when the service's PE_MAX_ELEMENTS
   *  allows it, else the first rows it allows, after a comment that says so; none when it
   *  refuses even one row. ``--fail-with-body``: a refusal is curl's error (exit 22), never
   *  a file that looks saved. Returns ``{command, url}`` (url "" when none is offered). */
  function curlCommand({ address, file, start, stop, width }) {
    const get = (range) => {
      const url = address(range);
      return { url, command: `curl --fail-with-body -o ${file} '${location.origin}${url}'` };
    };
    const rows = stop - start;
    if (!(rows * width > MAX_ELEMENTS)) return get(null);
    const n = (value) => value.toLocaleString("en");
    const over = `over this service's PE_MAX_ELEMENTS (${n(MAX_ELEMENTS)})`;
    const fits = Math.floor(MAX_ELEMENTS / width);
    if (fits < 1) return { url: "", command: `# none: one row is ${n(width)} numbers, ${over}` };
    const part = get({ start, stop: start + fits });
    const note = `# the whole answer, ${n(rows)} rows × ${n(width)} = ${n(rows * width)} ` +
      `numbers, is ${over}: this asks for rows ${n(start)} to ${n(start + fits - 1)}; change ` +
      "start and stop for the others";
    return { url: part.url, command: `${note}\n${part.command}` };
  }

  /** A family's preset menu (``#{prefix}-preset``) filled from ``families[family]`` of GET
   *  /v1/presets, and, as a preset is chosen, each of ``controls`` (a parameter's, by its
   *  name) enabled when the preset takes it, its blank showing what the preset fixes; and
   *  the preset's notes: ``#{prefix}-summary``, ``-fixes``, ``-rows`` and ``-sources`` in
   *  ``#{prefix}-preset-notes``. Resolves once the menu is filled (or, the presets not
   *  listed, with every control enabled: the service names what it refuses). */
  async function familyPresets(family, prefix, controls) {
    const select = $(`${prefix}-preset`);
    let presets = null;
    function update() {
      const preset = presets && presets[select.value];
      for (const control of controls) {
        const takes = !preset || preset.takes.includes(control.name);
        control.disabled = !takes;
        // blank: the preset's value (what it fixes, else the function's default)
        const shown = preset && control.name in preset.fixes
          ? String(preset.fixes[control.name]) : "default";
        if (control.options) control.options[0].textContent = shown;
        else control.placeholder = shown;
      }
      $(`${prefix}-preset-notes`).hidden = !preset;
      if (!preset) return;
      $(`${prefix}-summary`).textContent = preset.summary;
      const fixes = Object.entries(preset.fixes).map(([name, value]) => `${name}=${value}`);
      $(`${prefix}-fixes`).textContent = `fixes: ${fixes.join(", ") || "nothing"}; takes: ` +
        `${preset.takes.join(", ") || "nothing"}; rounding=library: ${preset.library_rounding}`;
      $(`${prefix}-rows`).textContent = `${preset.rows[0].toUpperCase()}${preset.rows.slice(1)}.`;
      $(`${prefix}-sources`).textContent = preset.follows
        .map((s) => `${s.repository} ${s.version}, ${s.path}: ${s.function}`).join("; ");
    }
    select.addEventListener("change", update);
    try {
      const response = await fetch("/v1/presets");
      if (!response.ok) throw await problemOf(response);
      const listed = (await response.json()).families[family];
      presets = Object.fromEntries(listed.map((preset) => [preset.name, preset]));
      const chosen = select.value;
      select.replaceChildren(...listed.map((preset) => {
        const option = new Option(preset.name, preset.name);
        option.title = preset.summary;
        return option;
      }));
      select.value = Object.hasOwn(presets, chosen) ? chosen : listed[0].name;
    } catch (error) {
      presets = null;
    }
    update();
  }

  /** The sinusoidal table's curl command (``curlCommand``). */
  function tableCurl(params) {
    return curlCommand({
      address: (range) => `${TABLE}?${query(params, { ...range, format: "npy" })}`,
      file: "pe.npy",
      start: 0,
      stop: Number(params.max_len),
      width: Number(params.d_model),
    });
  }

  async function loadPresets() {
    try {
      const response = await fetch("/v1/presets");
      if (!response.ok) throw await problemOf(response);
      presets = {};
      for (const preset of (await response.json()).presets) {
        presets[preset.name] = {
          base: preset.parameters.some((param) => param.name === "base"),
          layout: preset.layout === null,
        };
      }
    } catch (error) {
      presets = null; // every control stays enabled; the service names what it refuses
    }
    updateControls();
  }

  function updateControls() {
    const takes = presets && presets[$("preset").value];
    $("base").disabled = Boolean(takes) && !takes.base;
    $("layout").disabled = Boolean(takes) && !takes.layout;
    $("rounding").disabled = $("preset").value === "vaswani";
  }

  function restoreFromAddress() {
    const search = new URLSearchParams(location.search);
    if ((search.get("view") || "sinusoidal") !== "sinusoidal") return;
    for (const name of [...PARAMS, "dims", "position"]) {
      if (search.has(name)) $(name).value = search.get(name);
    }
  }

  function rememberInAddress(params) {
    if (active !== "sinusoidal") return; // the address is the view's on show
    const search = new URLSearchParams(query(params));
    search.set("dims", $("dims").value);
    search.set("position", $("position").value);
    history.replaceState(null, "", `?${search}`);
  }

  // --- loading ------------------------------------------------------------------------

  /** The service's problem as an Error: its fields' or its own detail, the document kept
   *  as ``problem`` (a limit names its ``setting``, ``limit`` and ``requested``). */
  async function problemOf(response) {
    let doc;
    try {
      doc = await response.json();
    } catch {
      return new Error(`${response.status} ${response.statusText}`);
    }
    const fields = (doc.errors || []).map((e) => `${e.name}: ${e.detail}`);
    const error = new Error(fields.length ? fields.join("; ") : doc.detail || doc.title);
    error.problem = doc;
    return error;
  }

  function decode(buffer, dtype) {
    if (dtype !== "float32") throw new Error(`unexpected X-Dtype ${dtype}`);
    if (LITTLE_ENDIAN) return new Float32Array(buffer);
    const view = new DataView(buffer);
    const out = new Float32Array(buffer.byteLength / 4);
    for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
    return out;
  }

  /** A raw answer: its X-Shape and its float32 values. */
  async function fetchRaw(url, signal, init = {}) {
    const headers = { Accept: "application/octet-stream", ...(init.headers || {}) };
    const response = await fetch(url, { ...init, headers, signal });
    if (!response.ok) throw await problemOf(response);
    const shape = (response.headers.get("X-Shape") || "").split(",").map(Number);
    const data = decode(await response.arrayBuffer(), response.headers.get("X-Dtype"));
    if (shape.reduce((a, b) => a * b, 1) !== data.length) {
      throw new Error(`unexpected X-Shape ${response.headers.get("X-Shape")} from ${url}`);
    }
    return { shape, data };
  }

  // --- sampling -----------------------------------------------------------------------

  /** Which of positions ``start .. stop-1`` a view fetches, at ``width`` entries a position:
   *  every one when they fit in MAX_ENTRIES (one request, as for a short table), else every
   *  ``step``-th from ``start``, ``count`` of them (at most SAMPLES). */
  function sampling(start, stop, width) {
    const total = stop - start;
    const fits = Math.max(1, Math.floor(MAX_ENTRIES / width));
    // not a number (a blank field): one request as typed, and the service names the problem
    if (!(total > fits)) return { start, stop, step: 1, count: total, total };
    const step = Math.ceil(total / Math.min(SAMPLES, fits));
    return { start, stop, step, count: Math.ceil(total / step), total };
  }

  /** ``n`` as an ordinal: 2nd, 64th, 101st, 112th. */
  function ordinal(n) {
    const tens = n % 100;
    const suffix = tens >= 11 && tens <= 13 ? "th" : { 1: "st", 2: "nd", 3: "rd" }[n % 10] || "th";
    return `${n.toLocaleString("en")}${suffix}`;
  }

  /** What the page says of a sampled ``plan`` ("" when it holds every position). */
  function samplingNote(plan) {
    if (plan.step === 1) return "";
    const n = (value) => value.toLocaleString("en");
    const range = plan.start === 0 ? ""
      : ` from ${n(plan.start)} to ${n(plan.stop - 1)}`;
    return `Sampled: every ${ordinal(plan.step)} position of ${n(plan.total)}${range} ` +
      `(${n(plan.count)} rows, one request each): the table holds more than the ` +
      `${n(MAX_ENTRIES)} entries the page draws. Waves shorter than ${n(2 * plan.step)} ` +
      "positions are aliased.";
  }

  /** The limit on elements a problem names (PE_MAX_ELEMENTS), or null. */
  function elementLimit(error) {
    const doc = error.problem;
    return doc && doc.setting === "PE_MAX_ELEMENTS" && doc.limit > 0 && doc.requested > 0
      ? doc : null;
  }

  /** ``plan``'s rows. ``url(from, to)`` is the raw answer of rows ``from .. to-1``, shaped
   *  (...blocks, rows, width) (rotary's: cos, then sin); ``url()`` the whole block as the
   *  view names it. Returns ``{blocks, rows, width}``: a Float32Array of ``rows`` rows per
   *  block. A whole block the service finds over PE_MAX_ELEMENTS comes in slices under it;
   *  a sampled plan comes one row a request, FETCHES at a time, ``progress(done, all)``. */
  async function fetchRows(plan, url, signal, progress) {
    if (plan.step === 1) {
      try {
        const { shape, data } = await fetchRaw(url(), signal);
        return { blocks: split(shape, data), rows: shape.at(-2), width: shape.at(-1) };
      } catch (error) {
        const over = elementLimit(error);
        const rows = plan.stop - plan.start;
        const chunk = over ? Math.floor((over.limit * rows) / over.requested) : 0;
        if (!(chunk >= 1 && chunk < rows)) throw error;
        const slices = [];
        for (let a = plan.start; a < plan.stop; a += chunk) {
          slices.push([a, Math.min(a + chunk, plan.stop)]);
        }
        return fetchSlices(plan, slices, url, signal, progress);
      }
    }
    const slices = [];
    for (let i = 0; i < plan.count; i++) {
      const p = plan.start + i * plan.step;
      slices.push([p, p + 1]);
    }
    return fetchSlices(plan, slices, url, signal, progress);
  }

  /** The blocks of a raw answer shaped (...blocks, rows, width), as views of its data. */
  function split(shape, data) {
    const size = shape.at(-2) * shape.at(-1);
    const count = size ? data.length / size : 1;
    return Array.from({ length: count }, (_, b) => data.subarray(b * size, (b + 1) * size));
  }

  async function fetchSlices(plan, slices, url, signal, progress) {
    let blocks = null;
    let width = 0;
    let next = 0;
    let done = 0;
    let failed = false;
    async function worker() {
      while (!failed && next < slices.length) {
        const [from, to] = slices[next++];
        try {
          const { shape, data } = await fetchRaw(url(from, to), signal);
          const parts = split(shape, data);
          if (!blocks) {
            width = shape.at(-1);
            blocks = parts.map(() => new Float32Array(plan.count * width));
          }
          const row = (from - plan.start) / plan.step;
          parts.forEach((part, b) => blocks[b].set(part, row * width));
        } catch (error) {
          failed = true;
          throw error;
        }
        done += 1;
        if (progress) progress(done, slices.length);
      }
    }
    await Promise.all(Array.from({ length: Math.min(FETCHES, slices.length) }, worker));
    return { blocks, rows: plan.count, width };
  }

  async function load() {
    const params = readParams();
    const mine = ++generation;
    if (pending) pending.abort();
    pending = new AbortController();
    const maxLen = Number(params.max_len);
    const plan = sampling(0, maxLen, Number(params.d_model));
    document.body.dataset.state = "loading";
    $("status").textContent = "Loading…";
    const started = performance.now();
    const url = (start, stop) => `${TABLE}?${query(params, {
      ...(start === undefined ? {} : { start, stop }), format: "raw" })}`;
    const progress = (done, all) => {
      if (mine === generation) $("status").textContent = `Loading… ${done} of ${all} rows`;
    };
    try {
      const { blocks, rows, width: cols } = await fetchRows(plan, url, pending.signal, progress);
      const [table] = blocks;
      if (mine !== generation) return;
      const fetched = performance.now() - started;
      const total = plan.step === 1 ? rows : maxLen;
      current = { params, rows, cols, table, step: plan.step, total };
      const drawn = drawAll();
      $("problem").hidden = true;
      $("sampling").textContent = samplingNote(plan);
      $("sampling").hidden = plan.step === 1;
      const size = (table.byteLength / 1048576).toFixed(2);
      const shape = plan.step === 1 ? `${rows} × ${cols} float32 table (${size} MiB)`
        : `${rows} of ${maxLen.toLocaleString("en")} rows × ${cols}, float32 (${size} MiB)`;
      $("status").textContent = `${shape}: fetched in ` +
        `${fetched.toFixed(0)} ms, heatmap drawn in ${drawn.heatmap.toFixed(1)} ms, ` +
        `all three views in ${drawn.total.toFixed(1)} ms.`;
      Object.assign(document.body.dataset, {
        state: "ready",
        params: `${current.total}x${cols}@${params.base}:${params.layout}` +
          (params.preset === "vaswani" ? "" : `:${params.preset}:${params.rounding}`),
        step: plan.step,
        fetchMs: fetched.toFixed(2),
        heatmapMs: drawn.heatmap.toFixed(2),
        drawMs: drawn.total.toFixed(2),
      });
      showLinks(params);
      rememberInAddress(params);
    } catch (error) {
      if (error.name === "AbortError" || mine !== generation) return;
      fail(error);
    }
  }

  function fail(error) {
    refuse(error, DRAWN);
    current = null; // nothing to hover, redraw or copy
  }

  /** A refused request, shown in place of what its view drew. ``drawn`` names the view's
   *  parts: ``state``, the element whose data-state it keeps; ``status`` and ``problem``;
   *  the ``canvases`` an answer draws, blanked (no ``series`` left to read when hovering);
   *  the legends and readings written beside them, ``emptied``; the notes and links of the
   *  earlier answer, ``hidden``. Every view calls it on a refusal (and drops the answer it
   *  held), so none shows the problem under an earlier request's charts. */
  function refuse(error, drawn) {
    const { state, status, problem, canvases = [], emptied = [], hidden = [] } = drawn;
    state.dataset.state = "error";
    $(status).textContent = "";
    $(problem).textContent = error.message;
    $(problem).hidden = false;
    for (const id of canvases) {
      const canvas = $(id);
      const ctx = canvas.getContext("2d");
      ctx.setTransform(1, 0, 0, 1, 0, 0);
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      canvas.series = null;
    }
    for (const id of emptied) $(id).replaceChildren();
    for (const id of hidden) $(id).hidden = true;
    hide();
  }

  function showLinks(params) {
    $("sinusoidal-links").hidden = false;
    const curl = tableCurl(params);
    $("curl").textContent = curl.command;
    $("copy-curl").href = curl.url || "#";
    $("heatmap-png").href = `${TABLE}/heatmap.png?${query(params)}`;
    const { max_len, d_model, base } = params; // the layout does not change dot products
    $("similarity-png").href =
      `${TABLE}/similarity.png?${new URLSearchParams({ max_len, d_model, base })}`;
    $("similarity-png").hidden = params.preset !== "vaswani"; // the paper's table only
  }

  // --- canvases -----------------------------------------------------------------------

  /** Size the canvas to its CSS box in device pixels; the plot area within the margins. */
  function surface(canvas, right) {
    const ratio = window.devicePixelRatio || 1;
    const box = canvas.getBoundingClientRect();
    canvas.width = Math.max(1, Math.round(box.width * ratio));
    canvas.height = Math.max(1, Math.round(box.height * ratio));
    const ctx = canvas.getContext("2d");
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    const x = Math.round(MARGIN.left * ratio);
    const y = Math.round(MARGIN.top * ratio);
    const plot = {
      x,
      y,
      w: Math.max(1, canvas.width - x - Math.round((MARGIN.right + (right || 0)) * ratio)),
      h: Math.max(1, canvas.height - y - Math.round(MARGIN.bottom * ratio)),
    };
    canvas.plot = plot;
    canvas.ratio = ratio;
    return { ctx, plot, ratio };
  }

  function axes(ctx, plot, ratio, x, y) {
    ctx.save();
    ctx.strokeStyle = "#8a949e";
    ctx.fillStyle = "#1d232a";
    ctx.lineWidth = ratio;
    ctx.strokeRect(plot.x - 0.5, plot.y - 0.5, plot.w + 1, plot.h + 1);
    ctx.font = `${11 * ratio}px system-ui, "DejaVu Sans", sans-serif`;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    const xTicks = x.ticks || niceTicks(x.low, x.high, Math.max(2, plot.w / (80 * ratio)));
    for (const t of xTicks) {
      const px = plot.x + x.at(t);
      ctx.beginPath();
      ctx.moveTo(px, plot.y + plot.h);
      ctx.lineTo(px, plot.y + plot.h + 4 * ratio);
      ctx.stroke();
      ctx.fillText((x.text || tickText)(t), px, plot.y + plot.h + 6 * ratio);
    }
    ctx.fillText(x.label, plot.x + plot.w / 2, plot.y + plot.h + 22 * ratio);
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    const yTicks = y.ticks || niceTicks(y.low, y.high, Math.max(2, plot.h / (40 * ratio)));
    for (const t of yTicks) {
      const py = plot.y + y.at(t);
      ctx.beginPath();
      ctx.moveTo(plot.x - 4 * ratio, py);
      ctx.lineTo(plot.x, py);
      ctx.stroke();
      ctx.fillText((y.text || tickText)(t), plot.x - 6 * ratio, py);
    }
    ctx.translate(12 * ratio, plot.y + plot.h / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "center";
    ctx.fillText(y.label, 0, 0);
    ctx.restore();
  }

  function drawHeatmap() {
    const { rows, cols, table, step } = current;
    drawGrid($("heatmap"), {
      rows, cols, table, rowHigh: rows * step, rowLabel: "position", colLabel: "dimension",
    });
  }

  /** A table as a heatmap with its colour bar, in ``scale`` (``ENTRIES``: values in
   *  [-1, 1], RdBu; ``ANGLES``: (-π, π], cyclic): ``rows`` rows of ``cols`` down and
   *  across, row r at r / rows of ``rowHigh`` on the vertical axis (and column k at k /
   *  cols of ``colHigh``, by default ``cols``, across). */
  function drawGrid(canvas, {
    rows, cols, table, rowHigh, rowLabel, colLabel, colHigh = cols, scale = ENTRIES,
  }) {
    const { ctx, plot, ratio } = surface(canvas, COLORBAR);
    const image = ctx.createImageData(plot.w, plot.h);
    const pixels = image.data;
    const { lut, low, high } = scale;
    const colOf = new Int32Array(plot.w);
    // each pixel shows the entry under its top-left corner, as hovering reports it
    for (let px = 0; px < plot.w; px++) colOf[px] = Math.floor((px * cols) / plot.w);
    for (let py = 0; py < plot.h; py++) {
      const offset = Math.floor((py * rows) / plot.h) * cols;
      let p = py * plot.w * 4;
      for (let px = 0; px < plot.w; px++, p += 4) {
        const c = indexIn(table[offset + colOf[px]], low, high) * 3;
        pixels[p] = lut[c];
        pixels[p + 1] = lut[c + 1];
        pixels[p + 2] = lut[c + 2];
        pixels[p + 3] = 255;
      }
    }
    ctx.putImageData(image, plot.x, plot.y);
    axes(ctx, plot, ratio,
      { low: 0, high: colHigh, label: colLabel, at: (t) => (t / colHigh) * plot.w },
      { low: 0, high: rowHigh, label: rowLabel, at: (t) => (t / rowHigh) * plot.h });
    colorbar(ctx, plot, ratio, scale);
  }

  /** ``value``'s entry of a 256-colour map over ``low`` .. ``high``. */
  function indexIn(value, low, high) {
    const i = Math.round(((value - low) / (high - low)) * 255);
    return i < 0 ? 0 : i > 255 ? 255 : i;
  }

  function colorbar(ctx, plot, ratio, { lut, low, high, labels }) {
    const x = plot.x + plot.w + 18 * ratio;
    const w = 14 * ratio;
    for (let py = 0; py < plot.h; py++) {
      const c = indexIn(high - ((high - low) * py) / (plot.h - 1), low, high) * 3;
      ctx.fillStyle = `rgb(${lut[c]},${lut[c + 1]},${lut[c + 2]})`;
      ctx.fillRect(x, plot.y + py, w, 1);
    }
    ctx.fillStyle = "#1d232a";
    ctx.font = `${11 * ratio}px system-ui, "DejaVu Sans", sans-serif`;
    ctx.textBaseline = "middle";
    for (const [label, at] of labels) {
      ctx.fillText(label, x + w + 4 * ratio, plot.y + at * (plot.h - 1));
    }
  }

  function chosenDimensions() {
    return chosenColumns($("dims").value, current.cols);
  }

  /** The columns typed in ``text`` (at most as many as there are LINES), and the words that
   *  are none of 0 .. ``cols``-1. */
  function chosenColumns(text, cols) {
    const chosen = [];
    const outside = [];
    for (const part of text.split(/[\s,]+/).filter(Boolean)) {
      const k = Number(part);
      if (Number.isInteger(k) && k >= 0 && k < cols) {
        if (!chosen.includes(k)) chosen.push(k);
      } else {
        outside.push(part);
      }
    }
    return { chosen: chosen.slice(0, LINES.length), outside };
  }

  /** One polyline over positions; a column of pixels covering many positions draws their
   *  range, so no peak is lost however long the table. */
  function trace(ctx, plot, rows, valueAt, yOf) {
    ctx.beginPath();
    if (rows <= plot.w) {
      for (let r = 0; r < rows; r++) {
        const px = plot.x + (rows === 1 ? plot.w / 2 : (r / (rows - 1)) * plot.w);
        if (r === 0) ctx.moveTo(px, yOf(valueAt(r)));
        else ctx.lineTo(px, yOf(valueAt(r)));
      }
    } else {
      for (let px = 0; px < plot.w; px++) {
        const first = Math.floor((px * rows) / plot.w);
        const last = Math.max(first + 1, Math.floor(((px + 1) * rows) / plot.w));
        let low = Infinity;
        let high = -Infinity;
        for (let r = first; r < last; r++) {
          const v = valueAt(r);
          if (v < low) low = v;
          if (v > high) high = v;
        }
        if (px === 0) ctx.moveTo(plot.x, yOf(low));
        ctx.lineTo(plot.x + px, yOf(low));
        ctx.lineTo(plot.x + px, yOf(high));
      }
    }
    ctx.stroke();
  }

  /** Positions across: row r (position r × step) at r / (rows - 1) of the width. */
  function positionAxis(plot, rows, step) {
    const last = Math.max(rows - 1, 1) * step;
    return { low: 0, high: (rows - 1) * step, label: "position", at: (t) => (t / last) * plot.w };
  }

  function drawWaves() {
    const { rows, cols, table, step } = current;
    const canvas = $("waves");
    drawColumns(canvas, $("legend"), {
      rows, cols, table, x: (plot) => positionAxis(plot, rows, step), noun: "dimension",
      ...chosenDimensions(),
    });
  }

  /** The ``chosen`` columns of a table of values in [-1, 1] as lines over its ``rows``
   *  (``x(plot)``: their axis, as positionAxis's), each named "``noun`` k" in ``legend``,
   *  with the words typed that are no column (``outside``); ``canvas.dimensions`` keeps the
   *  columns drawn, for hovering. */
  function drawColumns(canvas, legend, { rows, cols, table, x, noun, chosen, outside }) {
    const { ctx, plot, ratio } = surface(canvas);
    const yOf = (v) => plot.y + ((1 - v) / 2) * plot.h;
    ctx.lineWidth = 1.5 * ratio;
    chosen.forEach((k, i) => {
      ctx.strokeStyle = LINES[i];
      trace(ctx, plot, rows, (r) => table[r * cols + k], yOf);
    });
    axes(ctx, plot, ratio, x(plot), {
      low: -1, high: 1, label: "value", at: (t) => ((1 - t) / 2) * plot.h,
    });
    legend.replaceChildren(...chosen.map((k, i) => {
      const item = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = LINES[i];
      item.append(swatch, `${noun} ${k}`);
      return item;
    }));
    if (outside.length) {
      const note = document.createElement("em");
      note.textContent = `not in 0..${cols - 1}: ${outside.join(", ")}`;
      legend.append(note);
    }
    canvas.dimensions = chosen;
  }

  /** PE[p] · PE[q] for the position p of row ``row`` and every row's q. */
  function similarities(row) {
    const { rows, cols, table } = current;
    const out = new Float64Array(rows);
    const base = row * cols;
    for (let q = 0; q < rows; q++) {
      let sum = 0;
      const at = q * cols;
      for (let k = 0; k < cols; k++) sum += table[base + k] * table[at + k];
      out[q] = sum;
    }
    return out;
  }

  /** The chosen position's row: the nearest position drawn (every step-th when sampled). */
  function chosenRow() {
    const { rows, step } = current;
    const asked = Number($("position").value) || 0;
    const row = Math.min(Math.max(0, Math.round(asked / step)), rows - 1);
    for (const control of [$("position"), $("position-slider")]) {
      control.step = step;
      control.max = (rows - 1) * step;
    }
    $("position").value = row * step;
    $("position-slider").value = row * step;
    return row;
  }

  function drawSimilarity() {
    const canvas = $("similarity");
    const { rows, step } = current;
    const { ctx, plot, ratio } = surface(canvas);
    const row = chosenRow();
    const p = row * step;
    const values = similarities(row);
    let low = Infinity;
    let high = -Infinity;
    for (const v of values) {
      if (v < low) low = v;
      if (v > high) high = v;
    }
    const pad = (high - low) * 0.05 || 1;
    low -= pad;
    high += pad;
    const yOf = (v) => plot.y + ((high - v) / (high - low)) * plot.h;
    const x = positionAxis(plot, rows, step);
    ctx.save();
    ctx.strokeStyle = "#b2182b";
    ctx.setLineDash([4 * ratio, 4 * ratio]);
    ctx.lineWidth = ratio;
    ctx.beginPath();
    ctx.moveTo(plot.x + x.at(p), plot.y);
    ctx.lineTo(plot.x + x.at(p), plot.y + plot.h);
    ctx.stroke();
    ctx.restore();
    ctx.strokeStyle = LINES[0];
    ctx.lineWidth = 1.5 * ratio;
    trace(ctx, plot, rows, (q) => values[q], yOf);
    axes(ctx, plot, ratio, { ...x, label: `position q (p = ${p})` }, {
      low, high, label: "PE[p] · PE[q]", at: (t) => ((high - t) / (high - low)) * plot.h,
    });
    canvas.values = values;
    canvas.position = p;
  }

  function drawAll() {
    const t0 = performance.now();
    drawHeatmap();
    const t1 = performance.now();
    drawWaves();
    drawSimilarity();
    return { heatmap: t1 - t0, total: performance.now() - t0 };
  }

  // --- hovering -----------------------------------------------------------------------

  /** The table row (and column, across ``cols``) under the mouse, or null off the plot. */
  function cell(canvas, event, cols, evenly) {
    const { plot, ratio } = canvas;
    const px = event.offsetX * ratio - plot.x;
    const py = event.offsetY * ratio - plot.y;
    if (!plot || px < 0 || py < 0 || px >= plot.w || py >= plot.h) return null;
    const { rows } = current;
    if (evenly) {
      const last = Math.max(rows - 1, 1);
      return { row: Math.min(rows - 1, Math.round((px / plot.w) * last)) };
    }
    return {
      row: Math.min(rows - 1, Math.floor((Math.floor(py) * rows) / plot.h)),
      col: Math.min(cols - 1, Math.floor((Math.floor(px) * cols) / plot.w)),
    };
  }

  function show(event, lines, data) {
    const readout = $("readout");
    readout.textContent = lines.join("\n");
    for (const key of Object.keys(readout.dataset)) delete readout.dataset[key];
    Object.assign(readout.dataset, data);
    readout.hidden = false;
    readout.style.left = `${event.clientX + 14}px`;
    readout.style.top = `${event.clientY + 14}px`;
  }

  function hide() {
    $("readout").hidden = true;
  }

  function onHeatmap(event) {
    if (!current) return;
    const { cols, table, step } = current;
    const at = cell(event.currentTarget, event, cols, false);
    if (!at) return hide();
    const value = shortest(table[at.row * cols + at.col]);
    const position = at.row * step;
    show(event, [`position ${position}`, `dimension ${at.col}`, `value ${value}`], {
      view: "heatmap", position, dimension: at.col, value,
    });
  }

  function onWaves(event) {
    if (!current) return;
    const canvas = event.currentTarget;
    const { cols, table, step } = current;
    const at = cell(canvas, event, cols, true);
    if (!at || !canvas.dimensions.length) return hide();
    const values = {};
    const position = at.row * step;
    const lines = [`position ${position}`];
    for (const k of canvas.dimensions) {
      values[k] = shortest(table[at.row * cols + k]);
      lines.push(`dimension ${k}: ${values[k]}`);
    }
    show(event, lines, { view: "waves", position, values: JSON.stringify(values) });
  }

  function onSimilarity(event) {
    if (!current) return;
    const canvas = event.currentTarget;
    const at = cell(canvas, event, current.cols, true);
    if (!at) return hide();
    const value = String(canvas.values[at.row]);
    const q = at.row * current.step;
    show(event, [`p ${canvas.position}, q ${q}`, `PE[p] · PE[q] = ${value}`], {
      view: "similarity", p: canvas.position, position: q, value,
    });
  }

  // --- wiring -------------------------------------------------------------------------

  async function copyCurl(event) {
    event.preventDefault();
    if (!current) return;
    await copyText(event.currentTarget, tableCurl(current.params).command);
  }

  /** Copies ``text`` and says so on ``link`` for two seconds. */
  async function copyText(link, text) {
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      const area = document.createElement("textarea");
      area.value = text;
      document.body.append(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    link.dataset.copied = text;
    link.textContent = "Copied the curl command";
    setTimeout(() => { link.textContent = "Copy the curl command"; }, 2000);
  }

  function debounce(work, ms) {
    let timer = 0;
    return () => {
      clearTimeout(timer);
      timer = setTimeout(work, ms);
    };
  }

  function redraw(view) {
    if (!current) return;
    view();
    rememberInAddress(current.params);
  }

  async function start() {
    restoreFromAddress();
    $("preset").addEventListener("change", updateControls);
    await loadPresets();
    const reload = debounce(load, 200);
    $("controls").addEventListener("submit", (event) => {
      event.preventDefault();
      load();
    });
    for (const name of PARAMS) $(name).addEventListener("change", reload);
    $("dims").addEventListener("input", debounce(() => redraw(drawWaves), 150));
    $("position").addEventListener("input", () => redraw(drawSimilarity));
    $("position-slider").addEventListener("input", () => {
      $("position").value = $("position-slider").value;
      redraw(drawSimilarity);
    });
    $("heatmap").addEventListener("mousemove", onHeatmap);
    $("waves").addEventListener("mousemove", onWaves);
    $("similarity").addEventListener("mousemove", onSimilarity);
    for (const id of ["heatmap", "waves", "similarity"]) $(id).addEventListener("mouseleave", hide);
    $("copy-curl").addEventListener("click", copyCurl);
    window.addEventListener("resize", debounce(() => current && active === "sinusoidal" && drawAll(), 150));
    for (const tab of document.querySelectorAll("#views a[data-view]")) {
      tab.addEventListener("click", (event) => {
        event.preventDefault();
        showView(tab.dataset.view);
      });
    }
    showView(new URLSearchParams(location.search).get("view") || "sinusoidal");
  }

  // --- views --------------------------------------------------------------------------

  function showSinusoidal() {
    if (!current) {
      load();
      return;
    }
    drawAll(); // canvases drawn while hidden have no size
    rememberInAddress(current.params);
  }

  /** Shows one view, hides the others; the view draws itself and takes the address. */
  function showView(name) {
    active = Object.hasOwn(views, name) ? name : "sinusoidal";
    for (const view of Object.keys(views)) $(`${view}-view`).hidden = view !== active;
    for (const tab of document.querySelectorAll("#views a[data-view]")) {
      tab.setAttribute("aria-current", tab.dataset.view === active ? "page" : "false");
    }
    hide();
    views[active].show();
  }

  views.sinusoidal = { show: showSinusoidal };
  window.explorer = {
    $, shortest, niceTicks, tickText, logTicks, compact, colormap, problemOf, decode, surface,
    axes, trace, drawGrid, drawColumns, chosenColumns, positionAxis, ENTRIES, ANGLES,
    show, hide, refuse, debounce, copyText, curlCommand, fetchRaw, fetchRows, sampling,
    familyPresets,
    samplingNote, elementLimit, ordinal,
    LINES, MAX_ENTRIES, SAMPLES,
    /** Adds a view: ``view.show()`` draws it (fetching what it needs) and sets the address. */
    register(name, view) {
      views[name] = view;
    },
    isActive: (name) => active === name,
  };
  // deferred scripts run in order before DOMContentLoaded: by then every view registered
  document.addEventListener("DOMContentLoaded", start);
})();
