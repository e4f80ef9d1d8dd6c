// The timestep view: a diffusion model's timestep embedding, fetched from the raw endpoint
// (little-endian float32 of shape (rows, dim)) and drawn as a heatmap and as chosen columns
// over the timestep; and, for values typed, the timestep the preset's embedding receives,
// read back from the rows POST /v1/encodings/timestep/positions answers. The presets (their
// summary, sources and what each fixes) are the service's (explorer.js's familyPresets).
// Uses explorer.js's helpers (window.explorer): a view of another table of sines and cosines
// needs its controls in index.html and a script like this one, registered with
// `E.register`; no libraries, no build step, no other host.
"use strict";

(() => {
  const E = window.explorer;
  const { $ } = E;
  const VIEW = "timestep";
  const TABLE = "/v1/encodings/timestep";
  const POSITIONS = `${TABLE}/positions`;
  const BASIC = ["preset", "max_len", "dim", "rounding"];
  const MOST_VALUES = 32; // values read back at once: a row each, and ~12 candidates each
  // the float32 path the received timesteps are read on: diffusers' function, every
  // parameter given, the timesteps in float32 and multiplied by nothing
  const FLOAT32_PATH = { preset: "diffusers", time_factor: "1", timestep_dtype: "float32" };
  const SHAPE = ["flip_sin_to_cos", "downscale_freq_shift", "max_period"]; // the frequencies'
  const n = (value) => value.toLocaleString("en");

  // {params, rows, cols, table, step, total}: row r is timestep r × step
  let current = null;
  let generation = 0;
  let pending = null;
  let reading = 0; // the latest read-back of the values, which wins
  // what an answer draws, taken down when a request is refused (explorer.js's ``refuse``)
  const DRAWN = {
    state: $(`${VIEW}-view`), status: `${VIEW}-status`, problem: `${VIEW}-problem`,
    canvases: [`${VIEW}-heatmap`, `${VIEW}-lines`],
    emptied: [`${VIEW}-legend`, `${VIEW}-received`],
    hidden: [`${VIEW}-sampling`, `${VIEW}-links`],
  };

  // --- parameters ---------------------------------------------------------------------

  /** The embedding's parameters' controls: each sent when the preset takes it. */
  function parameterControls() {
    return [...$(`${VIEW}-parameters`).querySelectorAll("input, select")];
  }

  /** The form as it stands: the basic parameters, and the non-blank ones the preset takes
   *  (a parameter it fixes would be refused). */
  function readParams() {
    const params = {};
    for (const name of BASIC) params[name] = $(`${VIEW}-${name}`).value.trim();
    for (const control of parameterControls()) {
      const value = control.value.trim();
      if (!control.disabled && value !== "") params[control.name] = value;
    }
    return params;
  }

  function query(params, extra) {
    return new URLSearchParams({ ...params, ...extra }).toString();
  }

  /** The values typed, as numbers (at most MOST_VALUES), or an Error naming the others. */
  function readValues() {
    const words = $(`${VIEW}-values`).value.split(/[\s,]+/).filter(Boolean);
    const values = words.map(Number);
    const bad = words.filter((word, i) => !Number.isFinite(values[i]));
    if (bad.length) throw new Error(`values: not numbers: ${bad.join(", ")}`);
    if (values.length > MOST_VALUES) throw new Error(`values: at most ${MOST_VALUES}`);
    return values;
  }

  /** The table's curl command (explorer.js's ``curlCommand``): dim numbers a timestep. */
  function tableCurl(params) {
    return E.curlCommand({
      address: (rows) => `${TABLE}?${query(params, { ...rows, format: "npy" })}`,
      file: "timestep.npy",
      start: 0,
      stop: Number(params.max_len),
      width: Number(params.dim),
    });
  }

  /** The rows of ``values`` as this preset's embedding gives them, saved as an .npy. */
  function positionsCurl(params, values) {
    const url = `${location.origin}${POSITIONS}?${query(params, { format: "npy" })}`;
    const body = JSON.stringify({ position_ids: values });
    return `curl --fail-with-body -o received.npy -H 'Content-Type: application/json' ` +
      `-d '${body}' '${url}'`;
  }

  function restoreFromAddress() {
    const search = new URLSearchParams(location.search);
    if (search.get("view") !== VIEW) return;
    const controls = $(`${VIEW}-controls`).elements;
    for (const [name, value] of search) {
      const control = controls.namedItem(name) || $(`${VIEW}-${name}`);
      if (control && "value" in control) {
        // a preset not yet listed: an option for it, until familyPresets lists them
        if (control.options && ![...control.options].some((o) => o.value === value)) {
          control.append(new Option(value, value));
        }
        control.value = value;
      }
    }
  }

  function rememberInAddress(params) {
    if (!E.isActive(VIEW)) return;
    const search = new URLSearchParams({
      view: VIEW, ...params, columns: $(`${VIEW}-columns`).value, values: $(`${VIEW}-values`).value,
    });
    history.replaceState(null, "", `?${search}`);
  }

  // --- loading ------------------------------------------------------------------------

  async function load() {
    const params = readParams();
    const mine = ++generation;
    if (pending) pending.abort();
    pending = new AbortController();
    const { signal } = pending;
    const maxLen = Number(params.max_len);
    const plan = E.sampling(0, maxLen, Number(params.dim));
    const view = $(`${VIEW}-view`);
    view.dataset.state = "loading";
    $(`${VIEW}-status`).textContent = "Loading…";
    const started = performance.now();
    const url = (from, to) => `${TABLE}?${query(params, {
      ...(from === undefined ? {} : { start: from, stop: to }), format: "raw" })}`;
    const progress = (done, all) => {
      if (mine === generation) $(`${VIEW}-status`).textContent = `Loading… ${done} of ${all} rows`;
    };
    try {
      const { blocks: [table], rows, width: cols } = await E.fetchRows(plan, url, signal, progress);
      if (mine !== generation) return;
      const fetched = performance.now() - started;
      current = { params, rows, cols, table, step: plan.step, total: plan.total };
      const drawn = drawAll();
      $(`${VIEW}-problem`).hidden = true;
      $(`${VIEW}-sampling`).textContent = E.samplingNote(plan);
      $(`${VIEW}-sampling`).hidden = plan.step === 1;
      const size = (table.byteLength / 1048576).toFixed(2);
      const shape = plan.step === 1 ? `${rows} timesteps × ${cols}`
        : `${rows} of ${n(maxLen)} timesteps × ${cols}`;
      $(`${VIEW}-status`).textContent = `${shape}, float32 (${size} MiB), preset ` +
        `${params.preset}: fetched in ${fetched.toFixed(0)} ms, drawn in ${drawn.toFixed(1)} ms.`;
      Object.assign(view.dataset, {
        state: "ready",
        params: query(params),
        step: plan.step,
        fetchMs: fetched.toFixed(2),
        drawMs: drawn.toFixed(2),
      });
      showLinks(params);
      rememberInAddress(params);
      readBack();
    } catch (error) {
      if (error.name === "AbortError" || mine !== generation) return;
      fail(error);
    }
  }

  function fail(error) {
    E.refuse(error, DRAWN);
    current = null; // nothing to hover, redraw or copy
  }

  function showLinks(params) {
    const curl = tableCurl(params);
    $(`${VIEW}-curl`).textContent = curl.command;
    $(`${VIEW}-copy-curl`).href = curl.url || "#";
    let values = [];
    try {
      values = readValues();
    } catch {
      // the read-back says what is wrong with them
    }
    $(`${VIEW}-positions-curl`).textContent = positionsCurl(params, values);
    // the audit takes the table's parameters but its rounding: it compares both
    const { max_len: maxLen, rounding, ...rest } = params;
    $(`${VIEW}-audit`).href = `/?${new URLSearchParams({
      view: "audit", family: VIEW, max_len: maxLen, parameters: query(rest),
    })}`;
    $(`${VIEW}-links`).hidden = false;
  }

  /** POSTed timesteps' rows: (values, dim) float32. */
  async function rowsAt(params, values, signal) {
    const init = {
      method: "POST",
      body: JSON.stringify({ position_ids: values }),
      headers: { "Content-Type": "application/json" },
    };
    const { shape, data } = await E.fetchRaw(`${POSITIONS}?${query(params, { format: "raw" })}`,
      signal, init);
    return { width: shape.at(-1), data };
  }

  /** The embedding's parameters as the service resolves them (the one-row JSON answer). */
  async function resolved(params, signal) {
    const url = `${TABLE}?${query(params, { start: 0, stop: 1, format: "json" })}`;
    const response = await fetch(url, { headers: { Accept: "application/json" }, signal });
    if (!response.ok) throw await E.problemOf(response);
    return response.json();
  }

  /** float32 ``x`` rounded to bfloat16 (to nearest, ties to even), as a number. */
  function bfloat16(x) {
    const bits = new Uint32Array(new Float32Array([x]).buffer);
    const b = bits[0];
    bits[0] = (b + 0x7fff + ((b >>> 16) & 1)) & 0xffff0000;
    return new Float32Array(bits.buffer)[0];
  }

  /** ``x`` rounded to float16's grid (its normal range; ties away), as a number. */
  function float16(x) {
    if (x === 0 || !Number.isFinite(x)) return x;
    const ulp = 2 ** (Math.max(Math.floor(Math.log2(Math.abs(x))), -14) - 10);
    return Math.round(x / ulp) * ulp;
  }

  /** Timesteps whose row may be ``x``'s: the shortest decimals near it, and it on the grids
   *  of float32, bfloat16 and float16, each as float32 (the float32 path casts to it). */
  function candidates(x) {
    const near = [1, 2, 3, 4, 5, 6, 7, 8].map((digits) => Number(x.toPrecision(digits)));
    const all = [...near, bfloat16(x), float16(x), x].map(Math.fround);
    return [...new Set(all)].filter(Number.isFinite);
  }

  /** The angle of pair i (its sine's and cosine's columns) in a row of ``width``. */
  function angleOf(row, i, half, flip) {
    const [sine, cosine] = flip ? [half + i, i] : [i, half + i];
    return Math.atan2(row[sine], row[cosine]);
  }

  /** Each value's received timestep: the candidate t (from the row's slowest pair: its
   *  angle as it is, or with the turns the value, or the value × time_factor, would make)
   *  whose row on the float32 path is nearest the value's row, the first of equals;
   *  ``{value, t, difference}``. */
  async function receivedTimesteps(params, values, signal) {
    const [given, resolvedParams] = await Promise.all([
      rowsAt(params, values, signal), resolved(params, signal),
    ]);
    const { dim } = resolvedParams;
    const half = Math.floor(dim / 2);
    if (!values.length || !half) return values.map((value) => ({ value, t: null, difference: 0 }));
    const path = { ...FLOAT32_PATH, max_len: params.max_len, dim, rounding: params.rounding };
    for (const name of SHAPE) path[name] = String(resolvedParams[name]);
    const flip = resolvedParams.flip_sin_to_cos;
    // the float32 path's angles at t = 1, scale 1: each pair's frequency
    const unit = await rowsAt({ ...path, scale: "1" }, [1], signal);
    let slowest = 0;
    let frequency = Infinity;
    for (let i = 0; i < half; i++) {
      const f = Math.abs(angleOf(unit.data, i, half, flip));
      if (f > 0 && f < frequency) [slowest, frequency] = [i, f];
    }
    const turn = resolvedParams.scale * frequency;
    const tried = values.map((value, j) => {
      const row = given.data.subarray(j * dim, (j + 1) * dim);
      const phase = angleOf(row, slowest, half, flip);
      const estimates = [0, value, value * resolvedParams.time_factor].map((start) => {
        const turns = Math.round((turn * start - phase) / (2 * Math.PI));
        return (phase + 2 * Math.PI * turns) / turn;
      });
      return { row, options: [...new Set(estimates.flatMap(candidates))] };
    });
    const asked = tried.flatMap((each) => each.options);
    const scaled = { ...path, scale: String(resolvedParams.scale) };
    const checked = await rowsAt(scaled, asked, signal);
    let at = 0;
    return tried.map(({ row, options }, j) => {
      let best = { t: null, difference: Infinity };
      for (const t of options) {
        const other = checked.data.subarray(at * dim, (at + 1) * dim);
        at += 1;
        let difference = 0;
        for (let k = 0; k < dim; k++) difference = Math.max(difference, Math.abs(row[k] - other[k]));
        if (difference < best.difference) best = { t, difference };
      }
      return { value: values[j], ...best };
    });
  }

  /** The values' received timesteps, listed (a refusal is said in the list: the table
   *  above is not the values'). */
  async function readBack() {
    if (!current) return;
    const mine = ++reading;
    const { params } = current;
    const section = $(`${VIEW}-received-view`);
    const body = $(`${VIEW}-received`);
    section.dataset.state = "loading";
    try {
      const values = readValues();
      $(`${VIEW}-positions-curl`).textContent = positionsCurl(params, values);
      const found = await receivedTimesteps(params, values, pending.signal);
      if (mine !== reading) return;
      body.replaceChildren(...found.map(({ value, t, difference }) => {
        const row = document.createElement("tr");
        const cells = [
          E.shortest(Math.fround(value)),
          t === null ? "—" : E.shortest(t),
          t === null ? "no frequencies" : difference === 0 ? "bitwise"
            : `max difference ${difference.toPrecision(2)}`,
        ].map((text) => {
          const cell = document.createElement("td");
          cell.textContent = text;
          return cell;
        });
        row.append(...cells);
        Object.assign(row.dataset, {
          value: String(value), received: t === null ? "" : E.shortest(t),
          difference: String(difference),
        });
        return row;
      }));
      Object.assign(section.dataset, { state: "ready", values: values.join(",") });
      rememberInAddress(params);
    } catch (error) {
      if (error.name === "AbortError" || mine !== reading) return;
      const row = document.createElement("tr");
      const cell = document.createElement("td");
      cell.colSpan = 3;
      cell.className = "problem";
      cell.textContent = error.message;
      row.append(cell);
      body.replaceChildren(row);
      section.dataset.state = "error";
    }
  }

  // --- drawing ------------------------------------------------------------------------

  function drawAll() {
    const t0 = performance.now();
    const { rows, cols, table, step } = current;
    E.drawGrid($(`${VIEW}-heatmap`), {
      rows, cols, table, rowHigh: rows * step, rowLabel: "timestep", colLabel: "column",
    });
    drawLines();
    return performance.now() - t0;
  }

  function drawLines() {
    const { rows, cols, table, step } = current;
    E.drawColumns($(`${VIEW}-lines`), $(`${VIEW}-legend`), {
      rows, cols, table, noun: "column",
      x: (plot) => ({ ...E.positionAxis(plot, rows, step), label: "timestep" }),
      ...E.chosenColumns($(`${VIEW}-columns`).value, cols),
    });
  }

  // --- hovering -----------------------------------------------------------------------

  function onHeatmap(event) {
    if (!current) return;
    const canvas = event.currentTarget;
    const { plot, ratio } = canvas;
    const { rows, cols, table, step } = current;
    const px = event.offsetX * ratio - plot.x;
    const py = event.offsetY * ratio - plot.y;
    if (px < 0 || py < 0 || px >= plot.w || py >= plot.h) return E.hide();
    const row = Math.min(rows - 1, Math.floor((Math.floor(py) * rows) / plot.h));
    const column = Math.min(cols - 1, Math.floor((Math.floor(px) * cols) / plot.w));
    const value = E.shortest(table[row * cols + column]);
    const timestep = row * step;
    E.show(event, [`timestep ${timestep}`, `column ${column}`, `value ${value}`], {
      view: canvas.id, position: timestep, dimension: column, value,
    });
  }

  function onLines(event) {
    if (!current) return;
    const canvas = event.currentTarget;
    const { plot, ratio, dimensions } = canvas;
    const { rows, cols, table, step } = current;
    const px = event.offsetX * ratio - plot.x;
    const py = event.offsetY * ratio - plot.y;
    if (px < 0 || py < 0 || px >= plot.w || py >= plot.h || !dimensions.length) return E.hide();
    const row = Math.min(rows - 1, Math.round((px / plot.w) * Math.max(rows - 1, 1)));
    const values = {};
    const lines = [`timestep ${row * step}`];
    for (const k of dimensions) {
      values[k] = E.shortest(table[row * cols + k]);
      lines.push(`column ${k}: ${values[k]}`);
    }
    E.show(event, lines, { view: canvas.id, position: row * step, values: JSON.stringify(values) });
  }

  // --- wiring -------------------------------------------------------------------------

  function redrawLines() {
    if (!current) return;
    drawLines();
    rememberInAddress(current.params);
  }

  restoreFromAddress();
  // the preset menu and notes, and which parameters' controls the chosen preset takes
  const ready = E.familyPresets(VIEW, VIEW, parameterControls());
  $(`${VIEW}-controls`).addEventListener("submit", (event) => {
    event.preventDefault();
    load();
  });
  const reload = E.debounce(load, 200);
  for (const control of $(`${VIEW}-controls`).querySelectorAll("input, select")) {
    control.addEventListener("change", reload);
  }
  $(`${VIEW}-columns`).addEventListener("input", E.debounce(redrawLines, 150));
  $(`${VIEW}-values`).addEventListener("input", E.debounce(readBack, 300));
  $(`${VIEW}-heatmap`).addEventListener("mousemove", onHeatmap);
  $(`${VIEW}-lines`).addEventListener("mousemove", onLines);
  for (const id of ["heatmap", "lines"]) $(`${VIEW}-${id}`).addEventListener("mouseleave", E.hide);
  for (const [link, command] of [
    ["copy-curl", () => tableCurl(current.params).command],
    ["copy-positions-curl", () => $(`${VIEW}-positions-curl`).textContent],
  ]) {
    $(`${VIEW}-${link}`).addEventListener("click", async (event) => {
      event.preventDefault();
      if (current) await E.copyText(event.currentTarget, command());
    });
  }
  window.addEventListener("resize", E.debounce(() => current && E.isActive(VIEW) && drawAll(), 150));
  E.register(VIEW, {
    async show() {
      await ready; // the presets: which parameters the chosen one takes
      if (!current) {
        load();
        return;
      }
      drawAll(); // canvases drawn while hidden have no size
      rememberInAddress(current.params);
    },
  });
})();
