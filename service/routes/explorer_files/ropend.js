// The multi-axis RoPE view: a diffusion transformer's rotary table (GET
// /v1/encodings/rope-nd), fetched raw (little-endian float32 of shape (2, tokens,
// head_dim), cos then sin, as the rotary view fetches its table) and drawn as the angle of
// each pair at each token (a cyclic heatmap, the text tokens first), as one token's columns
// on the bands of the axes whose pairs they are, and as one pair's angle at each cell of the
// grid, an image of it (a frame's, for video). The axes' widths, the text tokens and the
// grid are the service's (the one-row JSON answer); the presets too (explorer.js's
// familyPresets). Uses explorer.js's helpers (window.explorer); no libraries, no build
// step, no other host.
"use strict";

(() => {
  const E = window.explorer;
  const { $ } = E;
  const VIEW = "ropend";
  const TABLE = "/v1/encodings/rope-nd";
  const BASIC = ["preset", "grid", "head_dim", "layout", "rounding"];
  const FETCHES = 6; // grid rows fetched at a time, as explorer.js's slices
  // the axes' bands (a colour an axis, in turn) and the two lines
  const BANDS = ["#e8f0e3", "#f6e6d8", "#e7e5f1", "#f3e1ea", "#e0ecf4"];
  const [COS, SIN] = E.LINES;
  const n = (value) => value.toLocaleString("en");

  // {params, key, rows, plan, angles, cos, sin, pairs, axisOf, cells, frame}: row r of the
  // tables is token r × plan.step; key is the service's resolved table (its axes_dim,
  // text_tokens, grid, head_dim, layout); cells the chosen frame's angles (``cellsOf``)
  let current = null;
  let generation = 0;
  let pending = null;
  let framing = 0; // the latest frame's fetch, which wins
  // what an answer draws, taken down when a request is refused (explorer.js's ``refuse``)
  const DRAWN = {
    state: $(`${VIEW}-view`), status: `${VIEW}-status`, problem: `${VIEW}-problem`,
    canvases: [`${VIEW}-heatmap`, `${VIEW}-columns`, `${VIEW}-grid-angles`],
    emptied: [`${VIEW}-axes`, `${VIEW}-where`, `${VIEW}-legend`, `${VIEW}-grid-note`],
    hidden: [`${VIEW}-sampling`, `${VIEW}-links`],
  };

  // --- parameters ---------------------------------------------------------------------

  /** The embedding's parameters' controls: each sent when the preset takes it. */
  function parameterControls() {
    return [...$(`${VIEW}-parameters`).querySelectorAll("input, select")];
  }

  /** The form as it stands: the basic parameters (head_dim when given), and the non-blank
   *  ones the preset takes (a parameter it fixes would be refused). */
  function readParams() {
    const params = {};
    for (const name of BASIC) {
      const value = $(`${VIEW}-${name}`).value.trim();
      if (value !== "" || name !== "head_dim") params[name] = value;
    }
    for (const control of parameterControls()) {
      const value = control.value.trim();
      if (!control.disabled && value !== "") params[control.name] = value;
    }
    return params;
  }

  function query(params, extra) {
    return new URLSearchParams({ ...params, ...extra }).toString();
  }

  /** The tables' curl command (explorer.js's ``curlCommand``): cos and sin as an .npz,
   *  2 × head_dim numbers a token. */
  function tableCurl(params, key) {
    return E.curlCommand({
      address: (range) => `${TABLE}?${query(params, { ...range, format: "npz" })}`,
      file: "rope-nd.npz",
      start: 0,
      stop: key.tokens,
      width: 2 * key.head_dim,
    });
  }

  function restoreFromAddress() {
    const search = new URLSearchParams(location.search);
    if (search.get("view") !== VIEW) return;
    for (const [name, value] of search) {
      const control = $(`${VIEW}-${name}`);
      if (name === "view" || !control || !("value" in control)) continue;
      // a preset not yet listed: an option for it, until familyPresets lists them
      if (control.options && ![...control.options].some((o) => o.value === value)) {
        control.append(new Option(value, value));
      }
      control.value = value;
    }
  }

  function rememberInAddress() {
    if (!E.isActive(VIEW) || !current) return;
    const search = new URLSearchParams({
      view: VIEW, ...current.params, token: $(`${VIEW}-token`).value,
      pair: $(`${VIEW}-pair`).value, frame: $(`${VIEW}-frame`).value,
    });
    history.replaceState(null, "", `?${search}`);
  }

  // --- the grid -----------------------------------------------------------------------

  /** The table as the service resolves it (the one-row JSON answer): its grid, tokens,
   *  axes' widths, text tokens, head_dim and layout. */
  async function keyOf(params, signal) {
    const url = `${TABLE}?${query(params, { start: 0, stop: 1, format: "json" })}`;
    const response = await fetch(url, { headers: { Accept: "application/json" }, signal });
    if (!response.ok) throw await E.problemOf(response);
    return response.json();
  }

  /** The grid as frames of height × width cells: its last two sizes, the others' product
   *  the frames (a 1-D grid: one row). */
  function shapeOf(key) {
    const sizes = key.grid;
    const width = sizes.at(-1);
    const height = sizes.length > 1 ? sizes.at(-2) : 1;
    const frames = sizes.slice(0, -2).reduce((a, b) => a * b, 1);
    return { frames, height, width };
  }

  /** The column of pair i's cos (its sin's alike, in the sin table). */
  function columnOf(key, i) {
    return key.layout === "interleaved" ? 2 * i : i;
  }

  /** The angles (rows × pairs) of cos and sin tables of ``rows`` rows. */
  function anglesOf(key, cos, sin, rows) {
    const pairs = key.head_dim / 2;
    const angles = new Float32Array(rows * pairs);
    for (let r = 0; r < rows; r++) {
      const at = r * key.head_dim;
      for (let i = 0; i < pairs; i++) {
        const c = at + columnOf(key, i);
        angles[r * pairs + i] = Math.atan2(sin[c], cos[c]);
      }
    }
    return angles;
  }

  /** Where token ``t`` is: "text token l", or its frame, row and column of the grid. */
  function placeOf(key, t) {
    if (t < key.text_tokens) return { text: t };
    const { height, width } = shapeOf(key);
    const g = t - key.text_tokens;
    const frame = Math.floor(g / (height * width));
    const rest = g % (height * width);
    return { frame, row: Math.floor(rest / width), column: rest % width };
  }

  function said(key, place) {
    if ("text" in place) return `text token ${place.text}`;
    const frame = shapeOf(key).frames > 1 ? `frame ${place.frame}, ` : "";
    return `${frame}grid row ${place.row}, column ${place.column}`;
  }

  /** Frame ``f``'s cells: ``{every, at(row, column, pair)}``, the angles from the table
   *  when it holds every token, else fetched a grid row a request, every ``every``-th row
   *  when the frame has more entries than the page holds. */
  async function cellsOf(params, key, held, f, signal) {
    const { height, width } = shapeOf(key);
    const pairs = key.head_dim / 2;
    const first = key.text_tokens + f * height * width;
    if (held.plan.step === 1) {
      return { every: 1, at: (i, j, p) => held.angles[(first + i * width + j) * pairs + p] };
    }
    const fits = Math.max(1, Math.floor(E.MAX_ENTRIES / (2 * width * key.head_dim)));
    const every = Math.ceil(height / Math.min(height, fits));
    const lines = Array.from({ length: Math.ceil(height / every) }, (_, m) => m * every);
    const angles = new Float32Array(lines.length * width * pairs);
    let next = 0;
    async function worker() {
      while (next < lines.length) {
        const m = next++;
        const start = first + lines[m] * width;
        const url = `${TABLE}?${query(params, { start, stop: start + width, format: "raw" })}`;
        const { data } = await E.fetchRaw(url, signal);
        const size = width * key.head_dim;
        angles.set(anglesOf(key, data.subarray(0, size), data.subarray(size), width),
          m * width * pairs);
      }
    }
    await Promise.all(Array.from({ length: Math.min(FETCHES, lines.length) }, worker));
    return {
      every,
      at: (i, j, p) => (i % every ? null : angles[((i / every) * width + j) * pairs + p]),
    };
  }

  /** ``control`` and its slider kept within 0 .. ``last``; the value chosen. */
  function chosen(name, last) {
    const value = Math.min(Math.max(0, Math.round(Number($(`${VIEW}-${name}`).value) || 0)), last);
    for (const control of [$(`${VIEW}-${name}`), $(`${VIEW}-${name}-slider`)]) {
      control.max = last;
      control.value = value;
    }
    return value;
  }

  // --- loading ------------------------------------------------------------------------

  async function load() {
    const params = readParams();
    const mine = ++generation;
    if (pending) pending.abort();
    pending = new AbortController();
    const { signal } = pending;
    const view = $(`${VIEW}-view`);
    view.dataset.state = "loading";
    $(`${VIEW}-status`).textContent = "Loading…";
    const started = performance.now();
    try {
      const key = await keyOf(params, signal);
      const plan = E.sampling(0, key.tokens, 2 * key.head_dim);
      const url = (from, to) => `${TABLE}?${query(params, {
        ...(from === undefined ? {} : { start: from, stop: to }), format: "raw" })}`;
      const progress = (done, all) => {
        if (mine === generation) $(`${VIEW}-status`).textContent = `Loading… ${done} of ${all} rows`;
      };
      const { blocks: [cos, sin], rows } = await E.fetchRows(plan, url, signal, progress);
      const angles = anglesOf(key, cos, sin, rows);
      const f = chosen("frame", shapeOf(key).frames - 1);
      const cells = await cellsOf(params, key, { plan, angles }, f, signal);
      if (mine !== generation) return;
      const fetched = performance.now() - started;
      const axisOf = key.axes_dim.flatMap((d, k) => Array(d / 2).fill(k));
      current = {
        params, key, rows, plan, cos, sin, angles, pairs: key.head_dim / 2, axisOf, cells,
        frame: f,
      };
      const drawn = drawAll();
      $(`${VIEW}-problem`).hidden = true;
      $(`${VIEW}-sampling`).textContent = plan.step === 1 ? ""
        : `${E.samplingNote(plan).replaceAll("position", "token")} The grid below is ` +
          "fetched a grid row a request.";
      $(`${VIEW}-sampling`).hidden = plan.step === 1;
      const size = ((2 * cos.byteLength) / 1048576).toFixed(2);
      const shape = plan.step === 1 ? `${n(rows)} tokens` : `${n(rows)} of ${n(key.tokens)} tokens`;
      $(`${VIEW}-status`).textContent = `cos and sin, ${shape} × ${key.head_dim}, float32 ` +
        `(${size} MiB): ${n(key.text_tokens)} text tokens, then a ${key.grid.join(" × ")} ` +
        `grid; preset ${key.preset}: fetched in ${fetched.toFixed(0)} ms, drawn in ` +
        `${drawn.toFixed(1)} ms.`;
      Object.assign(view.dataset, {
        state: "ready",
        params: query(params),
        step: plan.step,
        textTokens: key.text_tokens,
        fetchMs: fetched.toFixed(2),
        drawMs: drawn.toFixed(2),
      });
      showLinks(params, key);
      rememberInAddress();
    } catch (error) {
      if (error.name === "AbortError" || mine !== generation) return;
      fail(error);
    }
  }

  /** Another frame chosen: drawn from the table held, or its cells fetched. */
  async function changeFrame() {
    if (!current) return;
    const f = chosen("frame", shapeOf(current.key).frames - 1);
    if (f === current.frame) return;
    const mine = ++framing;
    const { params, key, plan, angles } = current;
    try {
      const cells = await cellsOf(params, key, { plan, angles }, f, pending.signal);
      if (mine !== framing || !current || current.angles !== angles) return;
      Object.assign(current, { frame: f, cells });
      drawCells();
      rememberInAddress();
    } catch (error) {
      if (error.name === "AbortError" || mine !== framing) return;
      fail(error);
    }
  }

  function fail(error) {
    E.refuse(error, DRAWN);
    current = null; // nothing to hover, redraw or copy
  }

  function showLinks(params, key) {
    const curl = tableCurl(params, key);
    $(`${VIEW}-curl`).textContent = curl.command;
    $(`${VIEW}-copy-curl`).href = curl.url || "#";
    // the audit takes the table's parameters but its rounding: it compares both
    const { rounding, ...rest } = params;
    $(`${VIEW}-audit`).href = `/?${new URLSearchParams({
      view: "audit", family: "rope-nd", parameters: query(rest),
    })}`;
    $(`${VIEW}-links`).hidden = false;
  }

  // --- drawing ------------------------------------------------------------------------

  function drawAll() {
    const t0 = performance.now();
    const { rows, pairs, angles, plan, key } = current;
    E.drawGrid($(`${VIEW}-heatmap`), {
      rows, cols: pairs, table: angles, rowHigh: rows * plan.step, rowLabel: "token",
      colLabel: "pair", scale: E.ANGLES,
    });
    let first = 0;
    $(`${VIEW}-axes`).textContent = key.axes_dim.map((d, k) => {
      const pairsOf = `axis ${k}: pairs ${first}–${first + d / 2 - 1}`;
      first += d / 2;
      return pairsOf;
    }).join(", ") + (key.text_tokens ? `; tokens 0–${key.text_tokens - 1}: text` : "");
    drawToken();
    drawCells();
    return performance.now() - t0;
  }

  /** The columns of pair i: its cos's and its other member's. */
  function columnsOfPair(key, i) {
    return key.layout === "interleaved" ? [2 * i, 2 * i + 1] : [i, i + key.head_dim / 2];
  }

  /** The chosen token's cos and sin across the head's columns, on its axes' bands. */
  function drawToken() {
    const { key, rows, plan, cos, sin, axisOf } = current;
    const row = Math.round(chosen("token", key.tokens - 1) / plan.step);
    const token = Math.min(row, rows - 1) * plan.step;
    $(`${VIEW}-token`).value = token;
    $(`${VIEW}-token-slider`).value = token;
    $(`${VIEW}-token`).step = plan.step;
    const canvas = $(`${VIEW}-columns`);
    const { ctx, plot, ratio } = E.surface(canvas);
    const D = key.head_dim;
    const xAt = (c) => ((c + 0.5) / D) * plot.w;
    const yOf = (v) => plot.y + ((1 - v) / 2) * plot.h;
    const axisOfColumn = new Int32Array(D);
    for (let i = 0; i < D / 2; i++) {
      for (const c of columnsOfPair(key, i)) axisOfColumn[c] = axisOf[i];
    }
    for (let c = 0; c < D; c++) {
      ctx.fillStyle = BANDS[axisOfColumn[c] % BANDS.length];
      ctx.fillRect(plot.x + (c / D) * plot.w, plot.y, plot.w / D + 0.5, plot.h);
    }
    const r = Math.min(row, rows - 1);
    ctx.lineWidth = 1.5 * ratio;
    for (const [table, color] of [[cos, COS], [sin, SIN]]) {
      ctx.strokeStyle = color;
      ctx.beginPath();
      for (let c = 0; c < D; c++) {
        const y = yOf(table[r * D + c]);
        if (c === 0) ctx.moveTo(plot.x + xAt(c), y);
        else ctx.lineTo(plot.x + xAt(c), y);
      }
      ctx.stroke();
    }
    E.axes(ctx, plot, ratio, { low: 0, high: D, label: "column", at: (c) => (c / D) * plot.w },
      { low: -1, high: 1, label: "value", at: (t) => ((1 - t) / 2) * plot.h });
    const legend = $(`${VIEW}-legend`);
    const item = (color, text, band) => {
      const span = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = color;
      if (band) swatch.style.height = "0.8em";
      span.append(swatch, text);
      return span;
    };
    legend.replaceChildren(item(COS, "cos"), item(SIN, "sin"),
      ...key.axes_dim.map((d, k) => item(BANDS[k % BANDS.length], `axis ${k} (${d} columns)`, true)));
    $(`${VIEW}-where`).textContent = `token ${token}: ${said(key, placeOf(key, token))}`;
    Object.assign(canvas, { token, row: r, axisOfColumn });
  }

  /** The chosen pair's angle at each cell of the chosen frame, as an image of the grid;
   *  rows not held are left out, and the note says so. */
  function drawCells() {
    const { key, pairs, cells, frame, axisOf } = current;
    const { height, width, frames } = shapeOf(key);
    const p = chosen("pair", pairs - 1);
    const { every, at } = cells;
    const rows = Math.ceil(height / every);
    const image = new Float32Array(rows * width);
    for (let r = 0; r < rows; r++) {
      for (let j = 0; j < width; j++) image[r * width + j] = at(r * every, j, p);
    }
    const canvas = $(`${VIEW}-grid-angles`);
    // the cells square: the plot's height from its width (explorer.js's margins)
    const plotWidth = canvas.parentElement.clientWidth - (58 + 16 + 64);
    const high = Math.min(640, Math.max(160, (plotWidth * height) / width));
    canvas.style.height = `${Math.round(high + 12 + 40)}px`;
    E.drawGrid(canvas, {
      rows, cols: width, table: image, rowHigh: rows * every, rowLabel: "grid row",
      colLabel: "grid column", scale: E.ANGLES,
    });
    $(`${VIEW}-frame-control`).hidden = frames === 1;
    const where = frames > 1 ? ` of frame ${frame}` : "";
    const held = every === 1 ? ""
      : ` (every ${E.ordinal(every)} grid row: the frame has more entries than the page holds)`;
    $(`${VIEW}-grid-note`).textContent = `pair ${p} (axis ${axisOf[p]}) at each of the ` +
      `${height} × ${width} cells${where}${held}`;
    Object.assign(canvas, { every, shape: [rows, width], pair: p });
  }

  // --- hovering -----------------------------------------------------------------------

  function cellAt(canvas, event, rows, cols) {
    const { plot, ratio } = canvas;
    if (!plot) return null;
    const px = event.offsetX * ratio - plot.x;
    const py = event.offsetY * ratio - plot.y;
    if (px < 0 || py < 0 || px >= plot.w || py >= plot.h) return null;
    return {
      row: Math.min(rows - 1, Math.floor((Math.floor(py) * rows) / plot.h)),
      col: Math.min(cols - 1, Math.floor((Math.floor(px) * cols) / plot.w)),
    };
  }

  function onHeatmap(event) {
    if (!current) return;
    const { rows, pairs, angles, plan, key, axisOf } = current;
    const at = cellAt(event.currentTarget, event, rows, pairs);
    if (!at) return E.hide();
    const value = E.shortest(angles[at.row * pairs + at.col]);
    const token = at.row * plan.step;
    E.show(event, [`token ${token}: ${said(key, placeOf(key, token))}`,
      `pair ${at.col} (axis ${axisOf[at.col]})`, `angle ${value}`], {
      view: event.currentTarget.id, position: token, pair: at.col, value,
    });
  }

  function onColumns(event) {
    if (!current) return;
    const canvas = event.currentTarget;
    const { key, cos, sin } = current;
    const at = cellAt(canvas, event, 1, key.head_dim);
    if (!at) return E.hide();
    const c = at.col;
    const [cosine, sine] = [cos, sin].map((t) => E.shortest(t[canvas.row * key.head_dim + c]));
    E.show(event, [`token ${canvas.token}, column ${c} (axis ${canvas.axisOfColumn[c]})`,
      `cos ${cosine}`, `sin ${sine}`], {
      view: canvas.id, position: canvas.token, dimension: c, cos: cosine, sin: sine,
    });
  }

  function onCells(event) {
    if (!current) return;
    const canvas = event.currentTarget;
    const { key, frame, cells } = current;
    const [rows, width] = canvas.shape;
    const at = cellAt(canvas, event, rows, width);
    if (!at) return E.hide();
    const [i, j] = [at.row * canvas.every, at.col];
    const { height } = shapeOf(key);
    const token = key.text_tokens + frame * height * width + i * width + j;
    const value = E.shortest(cells.at(i, j, canvas.pair));
    E.show(event, [`token ${token}: ${said(key, placeOf(key, token))}`,
      `pair ${canvas.pair}: angle ${value}`], {
      view: canvas.id, position: token, row: i, column: j, frame, pair: canvas.pair, value,
    });
  }

  // --- wiring -------------------------------------------------------------------------

  function redraw(draw) {
    if (!current) return;
    draw();
    rememberInAddress();
  }

  restoreFromAddress();
  // the preset menu and notes, and which parameters' controls the chosen preset takes
  const ready = E.familyPresets("rope-nd", VIEW, parameterControls());
  $(`${VIEW}-controls`).addEventListener("submit", (event) => {
    event.preventDefault();
    load();
  });
  const reload = E.debounce(load, 200);
  for (const control of $(`${VIEW}-controls`).querySelectorAll("input, select")) {
    control.addEventListener("change", reload);
  }
  for (const [name, update] of [
    ["token", () => redraw(drawToken)],
    ["pair", () => redraw(drawCells)],
    ["frame", E.debounce(changeFrame, 150)],
  ]) {
    $(`${VIEW}-${name}`).addEventListener("input", update);
    $(`${VIEW}-${name}-slider`).addEventListener("input", () => {
      $(`${VIEW}-${name}`).value = $(`${VIEW}-${name}-slider`).value;
      update();
    });
  }
  $(`${VIEW}-heatmap`).addEventListener("mousemove", onHeatmap);
  $(`${VIEW}-columns`).addEventListener("mousemove", onColumns);
  $(`${VIEW}-grid-angles`).addEventListener("mousemove", onCells);
  for (const id of ["heatmap", "columns", "grid-angles"]) {
    $(`${VIEW}-${id}`).addEventListener("mouseleave", E.hide);
  }
  $(`${VIEW}-copy-curl`).addEventListener("click", async (event) => {
    event.preventDefault();
    if (current) await E.copyText(event.currentTarget, tableCurl(current.params, current.key).command);
  });
  window.addEventListener("resize", E.debounce(() => current && E.isActive(VIEW) && drawAll(), 150));
  E.register(VIEW, {
    async show() {
      await ready; // the presets: which parameters the chosen one takes
      if (!current) {
        load();
        return;
      }
      drawAll(); // canvases drawn while hidden have no size
      rememberInAddress();
    },
  });
})();
