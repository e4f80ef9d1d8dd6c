// The sin-cos grid view: the 2-D and 3-D sin-cos tables of a patch grid (GET
// /v1/encodings/sincos-2d and .../sincos-3d), fetched raw (little-endian float32 of shape
// (rows, dim)) and drawn as a heatmap (tokens × columns), as a strip of the coordinate each
// column follows (read from the answer: the width's, the height's, the frame's), and as one
// column's value at each patch, an image of the grid (a frame's, for 3-D). The grid's
// shape, its zero rows and its token order are the service's (the one-row JSON answer);
// the presets (their summary, sources and what each fixes) too (explorer.js's
// familyPresets). Uses explorer.js's helpers (window.explorer); no libraries, no build
// step, no other host.
"use strict";

(() => {
  const E = window.explorer;
  const { $ } = E;
  const VIEW = "sincos";
  const ENCODINGS = "/v1/encodings";
  const FAMILIES = ["sincos-2d", "sincos-3d"];
  const BASIC = ["height", "width", "dim", "rounding"];
  const FETCHES = 6; // grid lines fetched at a time, as explorer.js's slices
  // the coordinates a column may follow, as bits; the colours of rope.js's M-RoPE strip
  const COORDINATES = [
    { bit: 4, name: "width (x)", color: "#7570b3" },
    { bit: 2, name: "height (y)", color: "#d95f02" },
    { bit: 1, name: "frame (t)", color: "#1b9e77" },
  ];
  const NONE = "#8a949e";
  const COLORBAR = 64; // explorer.js's: the strip's columns under the heatmap's
  const SIDES = 58 + 16 + COLORBAR; // explorer.js's margins and colour bar, CSS pixels
  const SEVERAL = "#1d232a";
  const n = (value) => value.toLocaleString("en");

  // {family, params, grid, rows, cols, table, plan, patches, follows}: row r of table is
  // token r × plan.step; grid is the service's {frames, height, width, zeros, reverse};
  // patches the chosen frame's tokens held (``patchesOf``); follows a column's bits
  let current = null;
  let generation = 0;
  let pending = null;
  let framing = 0; // the latest frame's fetch, which wins
  // what an answer draws, taken down when a request is refused (explorer.js's ``refuse``)
  const DRAWN = {
    state: $(`${VIEW}-view`), status: `${VIEW}-status`, problem: `${VIEW}-problem`,
    canvases: [`${VIEW}-heatmap`, `${VIEW}-halves`, `${VIEW}-grid`],
    emptied: [`${VIEW}-halves-counts`, `${VIEW}-grid-note`],
    hidden: [`${VIEW}-sampling`, `${VIEW}-links`],
  };

  // --- parameters ---------------------------------------------------------------------

  const family = () => $(`${VIEW}-family`).value;
  const isVideo = (name) => name === "sincos-3d";

  /** A family's parameters' controls: each sent when its preset takes it. */
  function parameterControls(name) {
    return [...$(`${name}-parameters`).querySelectorAll("input, select")];
  }

  /** The form as it stands: the grid, the basic parameters, the family's preset and the
   *  non-blank parameters it takes (a parameter it fixes would be refused). */
  function readParams() {
    const chosen = family();
    const params = {};
    if (isVideo(chosen)) params.frames = $(`${VIEW}-frames`).value.trim();
    for (const name of BASIC) params[name] = $(`${VIEW}-${name}`).value.trim();
    params.preset = $(`${chosen}-preset`).value;
    for (const control of parameterControls(chosen)) {
      const value = control.value.trim();
      if (!control.disabled && value !== "") params[control.name] = value;
    }
    return params;
  }

  function query(params, extra) {
    return new URLSearchParams({ ...params, ...extra }).toString();
  }

  /** The table's curl command (explorer.js's ``curlCommand``): dim numbers a token. */
  function tableCurl(name, params, rows) {
    return E.curlCommand({
      address: (range) => `${ENCODINGS}/${name}?${query(params, { ...range, format: "npy" })}`,
      file: `${name}.npy`,
      start: 0,
      stop: rows,
      width: Number(params.dim),
    });
  }

  /** The chosen family's box (its preset, parameters and notes) shown, the other hidden;
   *  the frames only for a video. */
  function showFamily() {
    const chosen = family();
    for (const name of FAMILIES) $(`${name}-box`).hidden = name !== chosen;
    $(`${VIEW}-frames-label`).hidden = !isVideo(chosen);
    $(`${VIEW}-frame-control`).hidden = !isVideo(chosen);
  }

  function restoreFromAddress() {
    const search = new URLSearchParams(location.search);
    if (search.get("view") !== VIEW) return;
    if (FAMILIES.includes(search.get("family"))) $(`${VIEW}-family`).value = search.get("family");
    for (const [name, value] of search) {
      if (name === "view" || name === "family") continue;
      const control = $(`${VIEW}-${name}`) || $(`${family()}-${name}`);
      if (!control || !("value" in control)) continue;
      // a preset not yet listed: an option for it, until familyPresets lists them
      if (control.options && ![...control.options].some((o) => o.value === value)) {
        control.append(new Option(value, value));
      }
      control.value = value;
    }
    showFamily();
  }

  function rememberInAddress() {
    if (!E.isActive(VIEW) || !current) return;
    const search = new URLSearchParams({
      view: VIEW, family: current.family, ...current.params,
      column: $(`${VIEW}-column`).value, frame: $(`${VIEW}-frame`).value,
    });
    history.replaceState(null, "", `?${search}`);
  }

  // --- the grid -----------------------------------------------------------------------

  /** The grid as the service resolves it (the one-row JSON answer): frames, height,
   *  width, the zero rows first (extra_tokens, text_tokens), whether the tokens go column
   *  by column (timm's reverse_coord), and the rows. */
  async function gridOf(name, params, signal) {
    const url = `${ENCODINGS}/${name}?${query(params, { start: 0, stop: 1, format: "json" })}`;
    const response = await fetch(url, { headers: { Accept: "application/json" }, signal });
    if (!response.ok) throw await E.problemOf(response);
    const document = await response.json();
    return {
      frames: document.frames ?? 1,
      height: document.height,
      width: document.width,
      zeros: document.extra_tokens ?? document.text_tokens ?? 0,
      reverse: Boolean(document.reverse_coord),
      rows: document.rows,
    };
  }

  /** The table row of the patch at grid row ``i``, column ``j`` of frame ``f``. */
  function tokenAt(grid, f, i, j) {
    const { height, width, zeros, reverse } = grid;
    return zeros + f * height * width + (reverse ? j * height + i : i * width + j);
  }

  /** Where the table row ``token`` is: null for a zero row, else {f, i, j}. */
  function patchOf(grid, token) {
    const { height, width, zeros, reverse } = grid;
    if (token < zeros) return null;
    const g = token - zeros;
    const f = Math.floor(g / (height * width));
    const rest = g % (height * width);
    return reverse ? { f, i: rest % height, j: Math.floor(rest / height) }
      : { f, i: Math.floor(rest / width), j: rest % width };
  }

  /** The chosen frame, within the grid's frames (0 for a picture). */
  function chosenFrame(grid) {
    const last = grid.frames - 1;
    const frame = Math.min(Math.max(0, Math.round(Number($(`${VIEW}-frame`).value) || 0)), last);
    for (const control of [$(`${VIEW}-frame`), $(`${VIEW}-frame-slider`)]) {
      control.max = last;
      control.value = frame;
    }
    return frame;
  }

  /** The chosen column, within the row. */
  function chosenColumn(cols) {
    const column = Math.min(Math.max(0, Math.round(Number($(`${VIEW}-column`).value) || 0)),
      cols - 1);
    for (const control of [$(`${VIEW}-column`), $(`${VIEW}-column-slider`)]) {
      control.max = cols - 1;
      control.value = column;
    }
    return column;
  }

  /** Frame ``f``'s patches: ``{lines, every, at(i, j, c)}``, from the table when it holds
   *  every row, else fetched a grid line a request (a grid row, or a grid column when the
   *  tokens go column by column), every ``every``-th line when the frame has more entries
   *  than the page holds. ``at`` is null off the lines held. */
  async function patchesOf(name, params, grid, table, plan, f, signal) {
    const { height, width, reverse } = grid;
    const cols = Number(params.dim);
    if (plan.step === 1) {
      return {
        every: 1,
        at: (i, j, c) => table[tokenAt(grid, f, i, j) * cols + c],
      };
    }
    const [count, length] = reverse ? [width, height] : [height, width];
    const fits = Math.max(1, Math.floor(E.MAX_ENTRIES / (length * cols)));
    const every = Math.ceil(count / Math.min(count, fits));
    const lines = Array.from({ length: Math.ceil(count / every) }, (_, m) => m * every);
    const held = new Float32Array(lines.length * length * cols);
    const first = tokenAt(grid, f, 0, 0);
    let next = 0;
    async function worker() {
      while (next < lines.length) {
        const m = next++;
        const start = first + lines[m] * length;
        const url = `${ENCODINGS}/${name}?${query(params, {
          start, stop: start + length, format: "raw" })}`;
        const { data } = await E.fetchRaw(url, signal);
        held.set(data, m * length * cols);
      }
    }
    await Promise.all(Array.from({ length: Math.min(FETCHES, lines.length) }, worker));
    return {
      every,
      at: (i, j, c) => {
        const [line, k] = reverse ? [j, i] : [i, j];
        if (line % every) return null;
        return held[((line / every) * length + k) * cols + c];
      },
    };
  }

  /** The table row ``token``, from the table when it holds every row, else fetched. */
  async function rowAt(name, params, table, plan, token, signal) {
    const cols = Number(params.dim);
    if (plan.step === 1) return table.subarray(token * cols, (token + 1) * cols);
    const url = `${ENCODINGS}/${name}?${query(params, {
      start: token, stop: token + 1, format: "raw" })}`;
    return (await E.fetchRaw(url, signal)).data;
  }

  /** Each column's coordinates, as bits: the width's when its value changes along a grid
   *  row of the frame's patches held, the height's when down a grid column, the frame's
   *  when the first frame's first patch and the last frame's differ. */
  function coordinatesOf(grid, patches, cols, firstRow, lastRow) {
    const { height, width, reverse } = grid;
    const { every, at } = patches;
    const follows = new Uint8Array(cols);
    // along the lines held every patch; across them, every ``every``-th
    const [di, dj] = reverse ? [1, every] : [every, 1];
    for (let c = 0; c < cols; c++) {
      let bits = lastRow && firstRow[c] !== lastRow[c] ? 1 : 0;
      for (let i = 0; i < height && bits < 6; i += di) {
        for (let j = 0; j < width; j += dj) {
          const here = at(i, j, c);
          if (j + dj < width && at(i, j + dj, c) !== here) bits |= 4;
          if (i + di < height && at(i + di, j, c) !== here) bits |= 2;
        }
      }
      follows[c] = bits;
    }
    return follows;
  }

  // --- loading ------------------------------------------------------------------------

  async function load() {
    const name = family();
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
      const grid = await gridOf(name, params, signal);
      const cols = Number(params.dim);
      const plan = E.sampling(0, grid.rows, cols);
      const url = (from, to) => `${ENCODINGS}/${name}?${query(params, {
        ...(from === undefined ? {} : { start: from, stop: to }), format: "raw" })}`;
      const progress = (done, all) => {
        if (mine === generation) $(`${VIEW}-status`).textContent = `Loading… ${done} of ${all} rows`;
      };
      const { blocks: [table], rows } = await E.fetchRows(plan, url, signal, progress);
      const f = chosenFrame(grid);
      const first = tokenAt(grid, 0, 0, 0);
      const [patches, firstRow, lastRow] = await Promise.all([
        patchesOf(name, params, grid, table, plan, f, signal),
        rowAt(name, params, table, plan, first, signal),
        grid.frames > 1
          ? rowAt(name, params, table, plan, tokenAt(grid, grid.frames - 1, 0, 0), signal)
          : null,
      ]);
      if (mine !== generation) return;
      const fetched = performance.now() - started;
      const follows = coordinatesOf(grid, patches, cols, firstRow, lastRow);
      current = { family: name, params, grid, rows, cols, table, plan, frame: f, patches, follows };
      const drawn = drawAll();
      $(`${VIEW}-problem`).hidden = true;
      $(`${VIEW}-sampling`).textContent = plan.step === 1 ? ""
        : `${E.samplingNote(plan).replaceAll("position", "token")} The grid below is ` +
          "fetched a grid line a request.";
      $(`${VIEW}-sampling`).hidden = plan.step === 1;
      const size = (table.byteLength / 1048576).toFixed(2);
      const shape = plan.step === 1 ? `${n(rows)} tokens × ${cols}`
        : `${n(rows)} of ${n(grid.rows)} tokens × ${cols}`;
      const frames = isVideo(name) ? `${grid.frames} × ` : "";
      $(`${VIEW}-status`).textContent = `${shape}, float32 (${size} MiB): a ${frames}` +
        `${grid.height} × ${grid.width} grid after ${n(grid.zeros)} zero rows, preset ` +
        `${params.preset}: fetched in ${fetched.toFixed(0)} ms, drawn in ${drawn.toFixed(1)} ms.`;
      Object.assign(view.dataset, {
        state: "ready",
        family: name,
        params: query(params),
        step: plan.step,
        zeros: grid.zeros,
        fetchMs: fetched.toFixed(2),
        drawMs: drawn.toFixed(2),
      });
      showLinks(name, params, grid.rows);
      rememberInAddress();
    } catch (error) {
      if (error.name === "AbortError" || mine !== generation) return;
      fail(error);
    }
  }

  /** Another frame chosen: drawn from the table held, or its patches fetched. */
  async function changeFrame() {
    if (!current) return;
    const f = chosenFrame(current.grid);
    if (f === current.frame) return;
    const mine = ++framing;
    const { family: name, params, grid, table, plan } = current;
    try {
      const patches = await patchesOf(name, params, grid, table, plan, f, pending.signal);
      if (mine !== framing || !current || current.table !== table) return;
      Object.assign(current, { frame: f, patches });
      drawPatches();
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

  function showLinks(name, params, rows) {
    const curl = tableCurl(name, params, rows);
    $(`${VIEW}-curl`).textContent = curl.command;
    $(`${VIEW}-copy-curl`).href = curl.url || "#";
    // the audit takes the table's parameters but its rounding: it compares both
    const { rounding, ...rest } = params;
    $(`${VIEW}-audit`).href = `/?${new URLSearchParams({
      view: "audit", family: name, parameters: query(rest),
    })}`;
    $(`${VIEW}-links`).hidden = false;
  }

  // --- drawing ------------------------------------------------------------------------

  function drawAll() {
    const t0 = performance.now();
    const { rows, cols, table, plan } = current;
    E.drawGrid($(`${VIEW}-heatmap`), {
      rows, cols, table, rowHigh: rows * plan.step, rowLabel: "token", colLabel: "column",
    });
    drawHalves();
    drawPatches();
    return performance.now() - t0;
  }

  /** The colour of a column's coordinates (grey: none changes it; dark: several). */
  function colorOf(bits) {
    const one = COORDINATES.find((c) => c.bit === bits);
    return one ? one.color : bits ? SEVERAL : NONE;
  }

  function nameOf(bits) {
    const names = COORDINATES.filter((c) => bits & c.bit).map((c) => c.name);
    return names.length ? names.join(" and ") : "none (the same at every patch)";
  }

  /** A strip of the columns, each in its coordinate's colour, and the runs said in words
   *  ("width (x) 0–575"). */
  function drawHalves() {
    const { follows, cols } = current;
    const canvas = $(`${VIEW}-halves`);
    const { ctx, plot, ratio } = E.surface(canvas, COLORBAR);
    const width = plot.w / cols;
    for (let c = 0; c < cols; c++) {
      ctx.fillStyle = colorOf(follows[c]);
      ctx.fillRect(plot.x + c * width, plot.y, Math.max(width, ratio), plot.h);
    }
    E.axes(ctx, plot, ratio, { low: 0, high: cols, label: "column", at: (t) => t * width },
      { low: 0, high: 1, label: "", at: () => plot.h, ticks: [] });
    const runs = [];
    for (let c = 0; c < cols; c++) {
      const last = runs.at(-1);
      if (last && last.bits === follows[c]) last.stop = c + 1;
      else runs.push({ bits: follows[c], start: c, stop: c + 1 });
    }
    $(`${VIEW}-halves-counts`).textContent = runs.length > 16
      ? COORDINATES.map((k) => `${k.name} ${follows.filter((b) => b === k.bit).length}`)
        .join(", ")
      : runs.map((r) => `${nameOf(r.bits)} ${r.start}–${r.stop - 1}`).join(", ");
    canvas.follows = follows;
  }

  /** The chosen column at each patch of the chosen frame, as an image of the grid (its
   *  height from the grid's shape); lines not held are left out, and the note says so. */
  function drawPatches() {
    const { grid, patches, cols, frame } = current;
    const { height, width, reverse } = grid;
    const c = chosenColumn(cols);
    const { every, at } = patches;
    const [rowStep, colStep] = reverse ? [1, every] : [every, 1];
    const rows = Math.ceil(height / rowStep);
    const across = Math.ceil(width / colStep);
    const image = new Float32Array(rows * across);
    for (let r = 0; r < rows; r++) {
      for (let k = 0; k < across; k++) image[r * across + k] = at(r * rowStep, k * colStep, c);
    }
    const canvas = $(`${VIEW}-grid`);
    // the patches square: the plot's height from its width (explorer.js's margins)
    const plotWidth = canvas.parentElement.clientWidth - SIDES;
    const high = Math.min(640, Math.max(160, (plotWidth * height) / width));
    canvas.style.height = `${Math.round(high + 12 + 40)}px`;
    E.drawGrid(canvas, {
      rows, cols: across, table: image, rowHigh: rows * rowStep, colHigh: across * colStep,
      rowLabel: "grid row (y)", colLabel: "grid column (x)",
    });
    const where = isVideo(current.family) ? ` of frame ${frame}` : "";
    const held = every === 1 ? ""
      : ` (every ${E.ordinal(every)} grid ${reverse ? "column" : "row"}: the frame has more ` +
        "entries than the page holds)";
    $(`${VIEW}-grid-note`).textContent = `column ${c} (${nameOf(current.follows[c])}) at ` +
      `each of the ${height} × ${width} patches${where}${held}`;
    Object.assign(canvas, { steps: [rowStep, colStep], shape: [rows, across], column: c });
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

  function where(patch) {
    if (!patch) return "a zero row";
    const frame = isVideo(current.family) ? `frame ${patch.f}, ` : "";
    return `${frame}grid row ${patch.i}, column ${patch.j}`;
  }

  function onHeatmap(event) {
    if (!current) return;
    const { rows, cols, table, plan, grid } = current;
    const at = cellAt(event.currentTarget, event, rows, cols);
    if (!at) return E.hide();
    const value = E.shortest(table[at.row * cols + at.col]);
    const token = at.row * plan.step;
    E.show(event, [`token ${token}: ${where(patchOf(grid, token))}`, `column ${at.col}`,
      `value ${value}`], { view: event.currentTarget.id, position: token, dimension: at.col, value });
  }

  function onHalves(event) {
    if (!current) return;
    const at = cellAt(event.currentTarget, event, 1, current.cols);
    if (!at) return E.hide();
    const bits = current.follows[at.col];
    E.show(event, [`column ${at.col}`, nameOf(bits)], {
      view: event.currentTarget.id, dimension: at.col, follows: String(bits),
    });
  }

  function onPatches(event) {
    if (!current) return;
    const canvas = event.currentTarget;
    const { grid, frame, patches, cols } = current;
    const [rows, across] = canvas.shape;
    const at = cellAt(canvas, event, rows, across);
    if (!at) return E.hide();
    const [rowStep, colStep] = canvas.steps;
    const [i, j] = [at.row * rowStep, at.col * colStep];
    const c = canvas.column;
    const token = tokenAt(grid, frame, i, j);
    const value = E.shortest(patches.at(i, j, Math.min(c, cols - 1)));
    E.show(event, [`token ${token}: ${where({ f: frame, i, j })}`, `column ${c}: ${value}`], {
      view: canvas.id, position: token, row: i, column: j, frame, dimension: c, value,
    });
  }

  // --- wiring -------------------------------------------------------------------------

  function redrawPatches() {
    if (!current) return;
    drawPatches();
    rememberInAddress();
  }

  restoreFromAddress();
  // each family's preset menu and notes, and which parameters' controls its preset takes
  const ready = Promise.all(FAMILIES.map((name) =>
    E.familyPresets(name, name, parameterControls(name))));
  $(`${VIEW}-controls`).addEventListener("submit", (event) => {
    event.preventDefault();
    load();
  });
  const reload = E.debounce(load, 200);
  $(`${VIEW}-family`).addEventListener("change", showFamily);
  for (const control of $(`${VIEW}-controls`).querySelectorAll("input, select")) {
    control.addEventListener("change", reload);
  }
  for (const [name, redraw] of [["column", redrawPatches], ["frame", E.debounce(changeFrame, 150)]]) {
    $(`${VIEW}-${name}`).addEventListener("input", redraw);
    $(`${VIEW}-${name}-slider`).addEventListener("input", () => {
      $(`${VIEW}-${name}`).value = $(`${VIEW}-${name}-slider`).value;
      redraw();
    });
  }
  $(`${VIEW}-heatmap`).addEventListener("mousemove", onHeatmap);
  $(`${VIEW}-halves`).addEventListener("mousemove", onHalves);
  $(`${VIEW}-grid`).addEventListener("mousemove", onPatches);
  for (const id of ["heatmap", "halves", "grid"]) {
    $(`${VIEW}-${id}`).addEventListener("mouseleave", E.hide);
  }
  $(`${VIEW}-copy-curl`).addEventListener("click", async (event) => {
    event.preventDefault();
    if (current) {
      const { family: name, params, grid } = current;
      await E.copyText(event.currentTarget, tableCurl(name, params, grid.rows).command);
    }
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
