// The RoPE view: fetches rotary cos/sin tables from the raw endpoint (little-endian float32
// of shape (2, rows, r), cos first) and draws the angle of each pair over position, and the
// wavelength of each pair for the chosen scaling and for none against the original context.
// The wavelengths need positions 0 and 1 only, so they are fetched and drawn first, at any
// max_len; the angles of a table too long to hold are drawn every step-th position.
// Uses explorer.js's helpers (window.explorer); no libraries, no build step, no other host.
"use strict";

(() => {
  const E = window.explorer;
  const { $ } = E;
  const TABLE = "/v1/encodings/rotary";
  const BASIC = [
    "max_len", "head_dim", "base", "partial_rotary_factor", "convention", "rounding", "scaling",
  ];
  const RANGE = ["start", "stop"];
  const MROPE = ["mrope_section", "mrope_interleaved"]; // sent with a section only
  // each axis's row of position ids (t, h, w): position 1 on that axis, 0 on the others
  const UNIT_IDS = [[1, 0, 0], [0, 1, 0], [0, 0, 1]];
  const AXES = [
    { name: "temporal", color: "#1b9e77" },
    { name: "height", color: "#d95f02" },
    { name: "width", color: "#7570b3" },
  ];
  const LISTS = ["short_factor", "long_factor"]; // comma-separated, one number per pair
  const LUT = E.ANGLES.lut; // cyclic: an angle of -pi and one of pi look alike
  const COLORBAR = 64;
  const CHOSEN = "#2166ac";
  const NONE = "#8a949e";
  const CONTEXT = "#b2182b";

  // {params, query, plan, pairs, inv: {chosen, none}, factor, table}; table (null until it
  // came) is {rows, r, cos, sin, angles}: row i is position plan.start + i × plan.step
  let current = null;
  let generation = 0;
  let pending = null;
  // what an answer draws, taken down when a request is refused (explorer.js's ``refuse``)
  const DRAWN = {
    state: $("rope-view"), status: "rope-status", problem: "rope-problem",
    canvases: ["rope-angles", "rope-wavelengths", "rope-axes"],
    emptied: ["rope-legend", "rope-attention", "rope-axes-counts"],
    hidden: ["rope-sampling", "rope-axes-view", "rope-links"],
  };
  // a table refused after the same request's wavelengths came: those stay, being its own
  const TABLE_DRAWN = {
    ...DRAWN, canvases: ["rope-angles"], emptied: [], hidden: ["rope-sampling", "rope-links"],
  };

  // --- parameters ---------------------------------------------------------------------

  /** The controls of the scaling parameters, each with the scalings that take it. */
  function scalingControls() {
    return [...document.querySelectorAll("#rope-scaling-params [data-scalings]")].map((label) => ({
      label,
      control: label.querySelector("input, select"),
      scalings: label.dataset.scalings.split(/\s+/),
    }));
  }

  function updateControls() {
    const scaling = $("rope-scaling").value;
    // a blank field a scaling needs, and others would not have filled, gets its data-fill
    // ("scaling=value ..."): dynamic's max_position_embeddings, the length trained on
    for (const control of document.querySelectorAll("#rope-controls [data-fill]")) {
      const fill = control.dataset.fill.split(/\s+/).map((item) => item.split("="))
        .find(([name]) => name === scaling);
      if (fill && control.value.trim() === "") control.value = fill[1];
    }
    let shown = 0;
    for (const { label, scalings } of scalingControls()) {
      label.hidden = !scalings.includes(scaling);
      if (!label.hidden) shown += 1;
    }
    $("rope-scaling-params").hidden = shown === 0;
  }

  /** The form as it stands: the basic parameters, the chosen scaling's non-blank ones (a
   *  parameter the scaling does not take would be refused) and the range of positions. */
  function readParams() {
    const params = {};
    for (const name of BASIC) params[name] = $(`rope-${name}`).value.trim();
    for (const { control, scalings } of scalingControls()) {
      const value = control.value.trim();
      if (scalings.includes(params.scaling) && value !== "") params[control.name] = value;
    }
    for (const name of RANGE) {
      const value = $(`rope-${name}`).value.trim();
      if (value !== "") params[name] = value;
    }
    if ($("rope-mrope_section").value.trim() !== "") {
      for (const name of MROPE) params[name] = $(`rope-${name}`).value.trim();
    }
    return params;
  }

  function rotaryDim(params) {
    return Math.trunc(Number(params.head_dim) * Number(params.partial_rotary_factor));
  }

  /** A list of factors as sent: r/2 numbers as given; fewer are spread over the pairs by
   *  linear interpolation (one number is repeated), so a ramp is quick to type. */
  function expand(text, pairs) {
    const values = text.split(/[\s,]+/).filter(Boolean).map(Number);
    if (!values.length || values.length >= pairs || !values.every(Number.isFinite)) {
      return values.length && values.every(Number.isFinite) ? values.join(",") : text;
    }
    const out = [];
    for (let k = 0; k < pairs; k++) {
      const x = values.length === 1 || pairs === 1 ? 0 : (k * (values.length - 1)) / (pairs - 1);
      const i = Math.min(Math.floor(x), values.length - 2);
      const v = values.length === 1 ? values[0] : values[i] + (values[i + 1] - values[i]) * (x - i);
      out.push(Number(v.toPrecision(6)));
    }
    return out.join(",");
  }

  /** The query the service is sent: ``scaling`` none drops the scaling's parameters. */
  function query(params, extra, scaling) {
    const search = new URLSearchParams();
    const pairs = Math.floor(rotaryDim(params) / 2);
    for (const [name, value] of Object.entries(params)) {
      if (RANGE.includes(name)) continue;
      if (scaling === "none" && !BASIC.includes(name) && !MROPE.includes(name)) continue;
      search.set(name, LISTS.includes(name) ? expand(value, pairs) : value);
    }
    if (scaling) search.set("scaling", scaling);
    for (const [name, value] of Object.entries(extra || {})) search.set(name, value);
    return search.toString();
  }

  function range(params) {
    const extra = {};
    for (const name of RANGE) if (name in params) extra[name] = params[name];
    return extra;
  }

  /** The tables' curl command (explorer.js's ``curlCommand``): cos and sin, r each a row. */
  function curlCommand(params) {
    const start = Number(params.start || 0);
    return E.curlCommand({
      address: (rows) => `${TABLE}?${query(params, { ...(rows || range(params)), format: "npz" })}`,
      file: "rope.npz",
      start,
      stop: Number(params.stop || params.max_len),
      width: 2 * rotaryDim(params),
    });
  }

  function restoreFromAddress() {
    const search = new URLSearchParams(location.search);
    if (search.get("view") !== "rope") return;
    const controls = $("rope-controls").elements;
    for (const [name, value] of search) {
      const control = controls.namedItem(name);
      if (control && "value" in control) control.value = value;
    }
  }

  function rememberInAddress(params) {
    if (!E.isActive("rope")) return;
    const search = new URLSearchParams({ view: "rope", ...params });
    history.replaceState(null, "", `?${search}`);
  }

  // --- loading ------------------------------------------------------------------------

  /** Positions 0 and 1 (or 0 alone): cos and sin, (rows, r) each. */
  async function fetchFirst(url, signal) {
    const { shape, data } = await E.fetchRaw(url, signal);
    if (shape.length !== 3 || shape[0] !== 2) {
      throw new Error(`unexpected X-Shape ${shape} from ${TABLE}`);
    }
    const [, rows, r] = shape;
    return { rows, r, cos: data.subarray(0, rows * r), sin: data.subarray(rows * r) };
  }

  /** The column that holds pair ``k``'s value: half pairs (k, k + r/2), interleaved (2k, 2k+1). */
  function column(convention, k) {
    return convention === "interleaved" ? 2 * k : k;
  }

  /** atan2(sin, cos), wrapped to (-pi, pi]. */
  function angle(s, c) {
    const a = Math.atan2(s, c);
    return a === -Math.PI ? Math.PI : a;
  }

  /** Each pair's inverse frequency: its angle at position 1 (row 1 of rows 0..1). */
  function inverseFrequencies(block, convention) {
    const pairs = block.r / 2;
    const out = new Float64Array(pairs);
    for (let k = 0; k < pairs; k++) {
      const c = block.r + column(convention, k);
      out[k] = angle(block.sin[c], block.cos[c]);
    }
    return out;
  }

  /** Each pair's axis (0 temporal, 1 height, 2 width; -1: it does not turn), from the
   *  service's rows at the unit position ids of each axis. */
  async function fetchAxes(params, signal) {
    const url = `${TABLE}/positions?${query(params, { format: "raw" })}`;
    const body = JSON.stringify({ position_ids: UNIT_IDS });
    const init = { method: "POST", body, headers: { "Content-Type": "application/json" } };
    const { shape, data } = await E.fetchRaw(url, signal, init);
    const [, rows, r] = shape;
    const sin = data.subarray(rows * r);
    const axes = new Int8Array(r / 2);
    for (let k = 0; k < r / 2; k++) {
      const c = column(params.convention, k);
      const moved = [0, 1, 2].map((row) => Math.abs(sin[row * r + c]));
      const most = Math.max(...moved);
      axes[k] = most > 0 ? moved.indexOf(most) : -1;
    }
    return axes;
  }

  async function load() {
    const params = readParams();
    const mine = ++generation;
    if (pending) pending.abort();
    pending = new AbortController();
    const { signal } = pending;
    const maxLen = Number(params.max_len);
    const start = Number(params.start || 0);
    const plan = E.sampling(start, Number(params.stop || maxLen), 2 * rotaryDim(params));
    const view = $("rope-view");
    view.dataset.state = "loading";
    $("rope-status").textContent = "Loading…";
    const started = performance.now();
    const first = { start: 0, stop: maxLen >= 2 ? 2 : 1, format: "raw" };
    const wavelengths = Promise.all([
      fetchFirst(`${TABLE}?${query(params, first)}`, signal),
      params.scaling === "none" ? null
        : fetchFirst(`${TABLE}?${query(params, first, "none")}`, signal),
    ]);
    const url = (from, to) => `${TABLE}?${query(params, from === undefined
      ? { ...range(params), format: "raw" } : { start: from, stop: to, format: "raw" })}`;
    const progress = (done, all) => {
      if (mine === generation) $("rope-status").textContent = `Loading… ${done} of ${all} rows`;
    };
    const table = E.fetchRows(plan, url, signal, progress);
    table.catch(() => {}); // awaited once the wavelengths are drawn
    const axes = params.mrope_section ? fetchAxes(params, signal) : Promise.resolve(null);
    axes.catch(() => {}); // awaited with the wavelengths
    try {
      const [chosen, none] = await wavelengths;
      const turns = await axes;
      if (mine !== generation) return;
      current = {
        params,
        query: query(params),
        plan,
        pairs: chosen.r / 2,
        inv: chosen.rows >= 2 ? {
          chosen: inverseFrequencies(chosen, params.convention),
          none: inverseFrequencies(none || chosen, params.convention),
        } : null,
        factor: Math.hypot(chosen.cos[0], chosen.sin[0]), // pair 0 at position 0
        axes: turns,
        table: null,
      };
      $("rope-problem").hidden = true;
      $("rope-sampling").hidden = true;
      drawAll();
      const { blocks: [cos, sin], rows, width: r } = await table;
      if (mine !== generation) return;
      const fetched = performance.now() - started;
      const pairs = r / 2;
      const angles = new Float64Array(rows * pairs);
      for (let row = 0; row < rows; row++) {
        for (let k = 0; k < pairs; k++) {
          const c = row * r + column(params.convention, k);
          angles[row * pairs + k] = angle(sin[c], cos[c]);
        }
      }
      current.table = { rows, r, cos, sin, angles };
      const drawn = drawAll();
      $("rope-sampling").textContent = E.samplingNote(plan);
      $("rope-sampling").hidden = plan.step === 1;
      const positions = plan.step === 1 ? `${rows} positions`
        : `${rows} of ${plan.total.toLocaleString("en")} positions`;
      $("rope-status").textContent = `${positions} × ${pairs} pairs (rotary_dim ` +
        `${r}, ${params.convention}, scaling ${params.scaling}): fetched in ` +
        `${fetched.toFixed(0)} ms, drawn in ${drawn.toFixed(1)} ms.`;
      Object.assign(view.dataset, {
        state: "ready",
        params: current.query,
        attentionFactor: E.shortest(Math.fround(current.factor)),
        step: plan.step,
        fetchMs: fetched.toFixed(2),
        drawMs: drawn.toFixed(2),
      });
      const curl = curlCommand(params);
      $("rope-curl").textContent = curl.command;
      $("rope-copy-curl").href = curl.url || "#";
      $("rope-links").hidden = false;
      rememberInAddress(params);
    } catch (error) {
      if (error.name === "AbortError" || mine !== generation) return;
      pending.abort(); // whichever of the two is still fetching
      fail(error, current !== null && current.params === params);
    }
  }

  /** A refusal: what an earlier request drew goes; ``ownWavelengths``: the wavelengths
   *  drawn are the refused request's own (its table alone was refused), and stay. */
  function fail(error, ownWavelengths) {
    E.refuse(error, ownWavelengths ? TABLE_DRAWN : DRAWN);
    if (!ownWavelengths) current = null; // nothing to hover, redraw or copy
  }

  // --- canvases -----------------------------------------------------------------------

  function colorIndex(a) {
    const i = Math.round(((a + Math.PI) / (2 * Math.PI)) * 255);
    return i < 0 ? 0 : i > 255 ? 255 : i;
  }

  function drawAngles() {
    const canvas = $("rope-angles");
    const { ctx, plot, ratio } = E.surface(canvas, COLORBAR);
    if (!current.table) return; // still coming, or refused: the wavelengths stand alone
    const { pairs, plan: { start, step }, table: { rows, angles } } = current;
    const image = ctx.createImageData(plot.w, plot.h);
    const pixels = image.data;
    const rowOf = new Int32Array(plot.w); // each pixel shows the entry under its top-left corner
    for (let px = 0; px < plot.w; px++) rowOf[px] = Math.floor((px * rows) / plot.w);
    for (let py = 0; py < plot.h; py++) {
      const k = Math.floor((py * pairs) / plot.h);
      let p = py * plot.w * 4;
      for (let px = 0; px < plot.w; px++, p += 4) {
        const c = colorIndex(angles[rowOf[px] * pairs + k]) * 3;
        pixels[p] = LUT[c];
        pixels[p + 1] = LUT[c + 1];
        pixels[p + 2] = LUT[c + 2];
        pixels[p + 3] = 255;
      }
    }
    ctx.putImageData(image, plot.x, plot.y);
    const span = rows * step;
    const at = (t) => ((t - start) / span) * plot.w;
    E.axes(ctx, plot, ratio,
      { low: start, high: start + span, label: "position", at },
      { low: 0, high: pairs, label: "pair k", at: (t) => (t / pairs) * plot.h });
    colorbar(ctx, plot, ratio);
  }

  function colorbar(ctx, plot, ratio) {
    const x = plot.x + plot.w + 18 * ratio;
    const w = 14 * ratio;
    for (let py = 0; py < plot.h; py++) {
      const c = colorIndex(Math.PI - (2 * Math.PI * py) / (plot.h - 1)) * 3;
      ctx.fillStyle = `rgb(${LUT[c]},${LUT[c + 1]},${LUT[c + 2]})`;
      ctx.fillRect(x, plot.y + py, w, 1);
    }
    ctx.fillStyle = "#1d232a";
    ctx.font = `${11 * ratio}px system-ui, "DejaVu Sans", sans-serif`;
    ctx.textBaseline = "middle";
    for (const [label, at] of [["π", 0], ["π/2", 0.25], ["0", 0.5], ["−π/2", 0.75], ["−π", 1]]) {
      ctx.fillText(label, x + w + 4 * ratio, plot.y + at * (plot.h - 1));
    }
  }

  /** The original context: ``original_max_position_embeddings`` when the scaling takes it,
   *  dynamic's ``max_position_embeddings`` (its trained length), else ``max_len``. */
  function context(params) {
    if (params.original_max_position_embeddings) {
      return { value: Number(params.original_max_position_embeddings), name: "original context" };
    }
    if (params.scaling === "dynamic" && params.max_position_embeddings) {
      return { value: Number(params.max_position_embeddings), name: "original context" };
    }
    return { value: Number(params.max_len), name: "max_len" };
  }

  function wavelengths(inv) {
    return Array.from(inv, (w) => (w > 0 ? (2 * Math.PI) / w : Infinity));
  }

  function drawWavelengths() {
    const canvas = $("rope-wavelengths");
    const { ctx, plot, ratio } = E.surface(canvas);
    const { params, pairs, inv, factor } = current;
    const legend = $("rope-legend");
    const reading = $("rope-attention");
    reading.textContent = `attention factor ${E.shortest(Math.fround(factor))}` +
      " (√(cos² + sin²) at position 0; it multiplies cos and sin)";
    if (!inv) {
      legend.textContent = "The wavelengths need the angle at position 1: max_len ≥ 2.";
      canvas.series = null;
      return;
    }
    const series = [
      { name: "scaling none", color: NONE, dash: [5, 4], values: wavelengths(inv.none) },
      { name: `scaling ${params.scaling}`, color: CHOSEN, dash: [], values: wavelengths(inv.chosen) },
    ];
    if (params.scaling === "none") series.shift();
    const ctxLine = context(params);
    const lines = [{ ...ctxLine, dash: [] }];
    if (ctxLine.name !== "max_len") lines.push({ value: Number(params.max_len), name: "max_len", dash: [2, 3] });
    const finite = series.flatMap((s) => s.values).concat(lines.map((l) => l.value))
      .filter((v) => Number.isFinite(v) && v > 0);
    const low = Math.min(...finite) / 1.6;
    const high = Math.max(...finite) * 1.6;
    const span = Math.log10(high) - Math.log10(low);
    const yAt = (v) => ((Math.log10(high) - Math.log10(v)) / span) * plot.h;
    const last = Math.max(pairs - 1, 1);
    const xAt = (k) => (pairs === 1 ? plot.w / 2 : (k / last) * plot.w);
    ctx.save();
    ctx.beginPath();
    ctx.rect(plot.x, plot.y, plot.w, plot.h);
    ctx.clip();
    ctx.font = `${11 * ratio}px system-ui, "DejaVu Sans", sans-serif`;
    ctx.textBaseline = "bottom";
    for (const [i, line] of lines.entries()) {
      const y = plot.y + yAt(line.value);
      ctx.strokeStyle = CONTEXT;
      ctx.fillStyle = CONTEXT;
      ctx.lineWidth = ratio;
      ctx.setLineDash(line.dash.map((d) => d * ratio));
      ctx.beginPath();
      ctx.moveTo(plot.x, y);
      ctx.lineTo(plot.x + plot.w, y);
      ctx.stroke();
      // the first label at the right, the second at the left: close lines do not overlap
      ctx.textAlign = i ? "left" : "right";
      const x = i ? plot.x + 4 * ratio : plot.x + plot.w - 4 * ratio;
      ctx.fillText(`${line.name} ${line.value}`, x, y - 2 * ratio);
    }
    for (const s of series) {
      ctx.strokeStyle = s.color;
      ctx.fillStyle = s.color;
      ctx.lineWidth = 1.5 * ratio;
      ctx.setLineDash(s.dash.map((d) => d * ratio));
      ctx.beginPath();
      let drawing = false;
      s.values.forEach((v, k) => {
        if (!Number.isFinite(v)) {
          drawing = false;
          return;
        }
        const x = plot.x + xAt(k);
        const y = plot.y + yAt(v);
        if (drawing) ctx.lineTo(x, y);
        else ctx.moveTo(x, y);
        drawing = true;
      });
      ctx.stroke();
      if (pairs <= 128) {
        for (const [k, v] of s.values.entries()) {
          if (!Number.isFinite(v)) continue;
          ctx.beginPath();
          ctx.arc(plot.x + xAt(k), plot.y + yAt(v), 2 * ratio, 0, 2 * Math.PI);
          ctx.fill();
        }
      }
    }
    ctx.restore();
    E.axes(ctx, plot, ratio,
      { low: 0, high: pairs - 1, label: "pair k", at: xAt },
      { low, high, label: "wavelength 2π / inv_freq (positions)", at: yAt,
        ticks: E.logTicks(low, high), text: E.compact });
    legend.replaceChildren(...series.map((s) => {
      const item = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = s.color;
      item.append(swatch, s.name);
      return item;
    }));
    const outside = series.at(-1).values.filter((v) => v > ctxLine.value).length;
    const note = document.createElement("em");
    const where = ctxLine.name === "max_len" ? "max_len" : "the original context";
    note.textContent = `${outside} of ${pairs} pairs turn less than once in ${where} ` +
      `(${ctxLine.value} positions)`;
    legend.append(note);
    canvas.series = series;
    canvas.xAt = xAt;
  }

  /** M-RoPE: a strip of the pairs, each in its axis's color (grey: it does not turn). */
  function drawAxes() {
    const section = $("rope-axes-view");
    section.hidden = !current.axes;
    if (!current.axes) return;
    const { axes } = current;
    const canvas = $("rope-axes");
    const { ctx, plot, ratio } = E.surface(canvas);
    const pairs = axes.length;
    const width = plot.w / pairs;
    for (let k = 0; k < pairs; k++) {
      ctx.fillStyle = axes[k] < 0 ? NONE : AXES[axes[k]].color;
      ctx.fillRect(plot.x + k * width, plot.y, Math.max(width, ratio), plot.h);
    }
    const xAt = (k) => (k + 0.5) * width;
    E.axes(ctx, plot, ratio, { low: 0, high: pairs - 1, label: "pair k", at: xAt },
      { low: 0, high: 1, label: "", at: () => plot.h, ticks: [] });
    const counts = AXES.map((axis, i) => `${axis.name} ${axes.filter((a) => a === i).length}`);
    const still = axes.filter((a) => a < 0).length;
    $("rope-axes-counts").textContent = `pairs by axis: ${counts.join(", ")}` +
      (still ? `, none ${still}` : "");
    canvas.axes = axes;
  }

  function drawAll() {
    const t0 = performance.now();
    drawAngles();
    drawWavelengths();
    drawAxes();
    return performance.now() - t0;
  }

  // --- hovering -----------------------------------------------------------------------

  function inPlot(canvas, event) {
    const { plot, ratio } = canvas;
    if (!plot) return null;
    const px = event.offsetX * ratio - plot.x;
    const py = event.offsetY * ratio - plot.y;
    if (px < 0 || py < 0 || px >= plot.w || py >= plot.h) return null;
    return { px: Math.floor(px), py: Math.floor(py), plot };
  }

  function onAngles(event) {
    if (!current || !current.table) return;
    const at = inPlot(event.currentTarget, event);
    if (!at) return E.hide();
    const { pairs, params, plan: { start, step }, table: { rows, r, cos, sin, angles } } = current;
    const row = Math.min(rows - 1, Math.floor((at.px * rows) / at.plot.w));
    const position = start + row * step;
    const k = Math.min(pairs - 1, Math.floor((at.py * pairs) / at.plot.h));
    const col = column(params.convention, k);
    const other = params.convention === "interleaved" ? col + 1 : col + pairs;
    const c = E.shortest(cos[row * r + col]);
    const s = E.shortest(sin[row * r + col]);
    const a = angles[row * pairs + k];
    E.show(event, [
      `position ${position}`, `pair ${k} (columns ${col}, ${other})`,
      `cos ${c}`, `sin ${s}`, `angle ${a.toPrecision(8)} rad`,
    ], { view: "rope-angles", position, pair: k, cos: c, sin: s, angle: String(a) });
  }

  function onWavelengths(event) {
    if (!current || !current.inv) return;
    const canvas = event.currentTarget;
    const at = inPlot(canvas, event);
    if (!at || !canvas.series) return E.hide();
    const { pairs, inv } = current;
    const k = Math.min(pairs - 1, Math.max(0, Math.round((at.px / at.plot.w) * (pairs - 1))));
    const lines = [`pair ${k}`];
    const data = { view: "rope-wavelengths", pair: k, invFreq: String(inv.chosen[k]) };
    for (const s of canvas.series) lines.push(`${s.name}: wavelength ${E.compact(s.values[k])}`);
    lines.push(`inv_freq ${inv.chosen[k].toPrecision(8)}`);
    data.wavelength = String(canvas.series.at(-1).values[k]);
    if (canvas.series.length === 2) {
      const ratio = canvas.series[1].values[k] / canvas.series[0].values[k];
      lines.push(`× ${ratio.toPrecision(4)} the unscaled wavelength`);
      data.ratio = String(ratio);
    }
    E.show(event, lines, data);
  }

  // --- wiring -------------------------------------------------------------------------

  function showRope() {
    if (!current) {
      load();
      return;
    }
    drawAll(); // canvases drawn while hidden have no size
    rememberInAddress(current.params);
  }

  function wire() {
    restoreFromAddress();
    updateControls();
    const reload = E.debounce(load, 250);
    $("rope-controls").addEventListener("submit", (event) => {
      event.preventDefault();
      load();
    });
    $("rope-scaling").addEventListener("change", updateControls);
    for (const control of $("rope-controls").querySelectorAll("input, select")) {
      control.addEventListener("change", reload);
    }
    $("rope-angles").addEventListener("mousemove", onAngles);
    $("rope-wavelengths").addEventListener("mousemove", onWavelengths);
    for (const id of ["rope-angles", "rope-wavelengths"]) $(id).addEventListener("mouseleave", E.hide);
    $("rope-copy-curl").addEventListener("click", (event) => {
      event.preventDefault();
      if (current) E.copyText(event.currentTarget, curlCommand(current.params).command);
    });
    window.addEventListener("resize", E.debounce(() => current && E.isActive("rope") && drawAll(), 150));
  }

  wire();
  E.register("rope", { show: showRope });
})();
