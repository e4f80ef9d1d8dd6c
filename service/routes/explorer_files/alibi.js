// The ALiBi view: fetches the head slopes (float32, (H,)) and the bias (float32,
// (H, L, key_len), masked entries -inf) from the raw endpoints and draws one head large,
// every head small, and lists the slopes. Uses explorer.js's helpers (window.explorer).
// A bias too large to hold is drawn every step-th query and key: an entry depends on the
// distance i - j alone, so the last query row, which holds every distance, gives them all.
"use strict";

(() => {
  const E = window.explorer;
  const { $ } = E;
  const SLOPES = "/v1/biases/alibi/slopes";
  const BIAS = "/v1/biases/alibi";
  const PARAMS = ["num_heads", "max_len", "key_len", "form"];
  // matplotlib's viridis for the finite biases; masked entries in a colour it does not have
  const VIRIDIS = [
    "#440154", "#482475", "#414487", "#355f8d", "#2a788e", "#21918c", "#22a884", "#44bf70",
    "#7ad151", "#bddf26", "#fde725",
  ];
  const LUT = E.colormap(VIRIDIS, 256);
  const MASKED = [0xe7, 0x29, 0x8a];
  const COLORBAR = 84;
  const TILE = 110; // the smallest tile of "every head", CSS pixels
  const LABEL = 16; // the label above a tile, CSS pixels
  const ROW = 1 << 23; // the most entries of the one query row a sampled bias is read from

  // {params, heads, queries, keys, rows, cols, qstep, kstep, bias, slopes, ranges: [{low,
  // high, masked}]}: bias is (heads, rows, cols), row a query a × qstep, column b key b × kstep
  let current = null;
  let generation = 0;
  let pending = null;
  // what an answer draws, taken down when a request is refused (explorer.js's ``refuse``)
  const DRAWN = {
    state: $("alibi-view"), status: "alibi-status", problem: "alibi-problem",
    canvases: ["alibi-bias", "alibi-heads"], emptied: ["alibi-slopes"],
    hidden: ["alibi-sampling", "alibi-links"],
  };

  // --- parameters ---------------------------------------------------------------------

  function readParams() {
    const params = {};
    for (const name of PARAMS) {
      const value = $(`alibi-${name}`).value.trim();
      if (value !== "") params[name] = value; // a blank key_len is max_len
    }
    return params;
  }

  function query(params, extra) {
    return new URLSearchParams({ ...params, ...extra }).toString();
  }

  /** The bias's curl command (explorer.js's ``curlCommand``): a query row holds a key each
   *  a head. */
  function curlCommand(params) {
    return E.curlCommand({
      address: (rows) => `${BIAS}?${query(params, { ...rows, format: "npy" })}`,
      file: "alibi.npy",
      start: 0,
      stop: Number(params.max_len),
      width: Number(params.num_heads) * Number(params.key_len || params.max_len),
    });
  }

  function restoreFromAddress() {
    const search = new URLSearchParams(location.search);
    if (search.get("view") !== "alibi") return;
    for (const name of [...PARAMS, "head"]) {
      if (search.has(name)) $(`alibi-${name}`).value = search.get(name);
    }
  }

  function rememberInAddress(params) {
    if (!E.isActive("alibi")) return;
    const search = new URLSearchParams({ view: "alibi", ...params, head: $("alibi-head").value });
    history.replaceState(null, "", `?${search}`);
  }

  // --- loading ------------------------------------------------------------------------

  async function fetchRaw(url, signal, dims) {
    const answer = await E.fetchRaw(url, signal);
    if (answer.shape.length !== dims) {
      throw new Error(`unexpected X-Shape ${answer.shape} from ${url}`);
    }
    return answer;
  }

  /** Every step-th of ``count`` positions: at most ``most`` of them. */
  function every(count, most) {
    const step = Math.ceil(count / Math.min(most, count));
    return { step, count: Math.ceil(count / step) };
  }

  /** The sampled bias (heads, rows, cols) from ``last``, the last query row (heads, keys):
   *  query i sits at key position i + keys - queries, and its entry for key j is the last
   *  row's at the same distance (``-inf`` where j is after the query, when masked). */
  function fromLastRow(last, grid) {
    const { heads, queries, keys, form, rows, cols, qstep, kstep } = grid;
    const out = new Float32Array(heads * rows * cols);
    for (let h = 0; h < heads; h++) {
      const row = last.subarray(h * keys, (h + 1) * keys);
      for (let a = 0; a < rows; a++) {
        const query = a * qstep + keys - queries;
        const at = (h * rows + a) * cols;
        for (let b = 0; b < cols; b++) {
          const d = query - b * kstep;
          if (form === "symmetric") out[at + b] = row[keys - 1 - Math.abs(d)];
          else if (d < 0) out[at + b] = -Infinity;
          else out[at + b] = form === "bloom" ? row[b * kstep] : row[keys - 1 - d];
        }
      }
    }
    return out;
  }

  /** Every kstep-th column of sampled query rows: ``blocks`` a head each, (rows, keys). */
  function fromRows(blocks, grid) {
    const { heads, keys, rows, cols, kstep } = grid;
    const out = new Float32Array(heads * rows * cols);
    for (let h = 0; h < heads; h++) {
      for (let a = 0; a < rows; a++) {
        const at = (h * rows + a) * cols;
        for (let b = 0; b < cols; b++) out[at + b] = blocks[h][a * keys + b * kstep];
      }
    }
    return out;
  }

  /** A bias too large to hold (or refused whole by the service), sampled: from its last query
   *  row when that holds every distance (not so for a symmetric bias of fewer keys than
   *  queries: then from every qstep-th query row, a request each). */
  async function sampled(params, signal, progress, why) {
    const heads = Number(params.num_heads);
    const queries = Number(params.max_len);
    const keys = Number(params.key_len || params.max_len);
    if (heads * keys > ROW) {
      throw new Error(`num_heads × key_len is ${(heads * keys).toLocaleString("en")}; the ` +
        `explorer reads at most ${ROW.toLocaleString("en")} entries of one query row.`);
    }
    const side = Math.max(1, Math.min(E.SAMPLES, Math.floor(Math.sqrt(E.MAX_ENTRIES / heads))));
    const k = every(keys, side);
    const url = (start, stop) => `${BIAS}?${query(params, start === undefined
      ? { format: "raw" } : { start, stop, format: "raw" })}`;
    const grid = { heads, queries, keys, form: params.form, cols: k.count, kstep: k.step, why };
    if (params.form !== "symmetric" || keys >= queries) {
      const q = every(queries, side);
      Object.assign(grid, { rows: q.count, qstep: q.step, how: "diagonals" });
      const { data } = await fetchRaw(url(queries - 1, queries), signal, 3);
      return { ...grid, bias: fromLastRow(data, grid) };
    }
    const plan = E.sampling(0, queries, heads * keys); // whole rows: as many as fit
    Object.assign(grid, { rows: plan.count, qstep: plan.step, how: "rows" });
    const { blocks } = await E.fetchRows(plan, url, signal, progress);
    return { ...grid, bias: fromRows(blocks, grid) };
  }

  /** Each head's finite range, and whether it has masked entries. */
  function ranges(bias, heads, size) {
    const out = [];
    for (let h = 0; h < heads; h++) {
      let low = Infinity;
      let high = -Infinity;
      let masked = 0;
      for (let i = h * size; i < (h + 1) * size; i++) {
        const v = bias[i];
        if (!Number.isFinite(v)) masked += 1;
        else {
          if (v < low) low = v;
          if (v > high) high = v;
        }
      }
      out.push({ low, high, masked });
    }
    return out;
  }

  async function load() {
    const params = readParams();
    const mine = ++generation;
    if (pending) pending.abort();
    pending = new AbortController();
    const { signal } = pending;
    const keys = Number(params.key_len || params.max_len);
    const entries = Number(params.num_heads) * Number(params.max_len) * keys;
    const view = $("alibi-view");
    view.dataset.state = "loading";
    $("alibi-status").textContent = "Loading…";
    const started = performance.now();
    const progress = (done, all) => {
      if (mine === generation) $("alibi-status").textContent = `Loading… ${done} of ${all} rows`;
    };
    /** The whole bias as one grid; one over the service's PE_MAX_ELEMENTS is sampled. */
    async function whole() {
      try {
        const { shape: [heads, rows, cols], data } =
          await fetchRaw(`${BIAS}?${query(params, { format: "raw" })}`, signal, 3);
        return {
          heads, queries: rows, keys: cols, rows, cols, qstep: 1, kstep: 1, bias: data,
          how: "whole",
        };
      } catch (error) {
        if (E.elementLimit(error)) return sampled(params, signal, progress, "refused");
        throw error;
      }
    }
    try {
      const [slopes, grid] = await Promise.all([
        fetchRaw(`${SLOPES}?${query({ num_heads: params.num_heads }, { format: "raw" })}`,
          signal, 1),
        entries > E.MAX_ENTRIES ? sampled(params, signal, progress, "large") : whole(),
      ]);
      if (mine !== generation) return;
      const fetched = performance.now() - started;
      const { heads, queries, rows, cols, qstep, kstep, bias } = grid;
      current = {
        params, ...grid, slopes: slopes.data, ranges: ranges(bias, heads, rows * cols),
      };
      listSlopes();
      const drawn = drawAll();
      $("alibi-problem").hidden = true;
      $("alibi-sampling").textContent = samplingNote(grid);
      $("alibi-sampling").hidden = grid.how === "whole";
      const size = (bias.byteLength / 1048576).toFixed(2);
      const drawnOf = grid.how === "whole" ? "" : `, drawn ${rows} × ${cols}`;
      const n = (value) => value.toLocaleString("en");
      $("alibi-status").textContent = `${heads} heads × ${n(queries)} queries × ` +
        `${n(grid.keys)} keys${drawnOf}, float32 (${size} MiB): fetched in ` +
        `${fetched.toFixed(0)} ms, drawn in ${drawn.toFixed(1)} ms.`;
      Object.assign(view.dataset, {
        state: "ready",
        params: query(params),
        step: `${qstep},${kstep}`,
        fetchMs: fetched.toFixed(2),
        drawMs: drawn.toFixed(2),
      });
      const curl = curlCommand(params);
      $("alibi-curl").textContent = curl.command;
      $("alibi-copy-curl").href = curl.url || "#";
      $("alibi-links").hidden = false;
      rememberInAddress(params);
    } catch (error) {
      if (error.name === "AbortError" || mine !== generation) return;
      fail(error);
    }
  }

  /** What the page says of a grid not fetched whole ("" when it was). */
  function samplingNote({ how, why, queries, keys, rows, cols, qstep, kstep }) {
    if (how === "whole") return "";
    const n = (value) => value.toLocaleString("en");
    const every = (step, what) => `every ${step === 1 ? "" : `${E.ordinal(step)} `}${what}`;
    const which = qstep === 1 && kstep === 1 ? `Every entry of ${n(queries)} × ${n(keys)}`
      : `Sampled: ${every(qstep, "query")} and ${every(kstep, "key")} of ${n(queries)} × ` +
        `${n(keys)} (${n(rows)} × ${n(cols)})`;
    const from = how === "diagonals"
      ? "read from the last query row, one request (an entry depends on the distance i − j " +
        "alone, and that row holds every distance)"
      : "each query row fetched on its own";
    const reason = why === "large" ? `the bias holds more than the ${n(E.MAX_ENTRIES)} ` +
      "entries the page draws" : "the service refuses the whole bias (PE_MAX_ELEMENTS)";
    return `${which}, ${from}: ${reason}.`;
  }

  function fail(error) {
    E.refuse(error, DRAWN);
    current = null; // nothing to hover, redraw or copy
  }

  // --- drawing ------------------------------------------------------------------------

  function chosenHead() {
    const { heads } = current;
    const h = Math.min(Math.max(0, Math.round(Number($("alibi-head").value) || 0)), heads - 1);
    $("alibi-head").value = h;
    $("alibi-head").max = heads - 1;
    $("alibi-head-slider").max = heads - 1;
    $("alibi-head-slider").value = h;
    return h;
  }

  /** Paints head ``h`` into a ``w`` × ``h`` block of pixels (queries down, keys across). */
  function paint(pixels, stride, x0, y0, w, hgt, head) {
    const { rows, cols, bias, ranges: all } = current;
    const { low, high } = all[head];
    const scale = high > low ? 255 / (high - low) : 0;
    const base = head * rows * cols;
    for (let py = 0; py < hgt; py++) {
      const row = base + Math.floor((py * rows) / hgt) * cols;
      let p = ((y0 + py) * stride + x0) * 4;
      for (let px = 0; px < w; px++, p += 4) {
        const v = bias[row + Math.floor((px * cols) / w)];
        if (Number.isFinite(v)) {
          const c = (scale ? Math.round((v - low) * scale) : 128) * 3;
          pixels[p] = LUT[c];
          pixels[p + 1] = LUT[c + 1];
          pixels[p + 2] = LUT[c + 2];
        } else {
          [pixels[p], pixels[p + 1], pixels[p + 2]] = MASKED;
        }
        pixels[p + 3] = 255;
      }
    }
  }

  function drawHead() {
    const canvas = $("alibi-bias");
    const { rows, cols, ranges: all } = current;
    const head = chosenHead();
    const { ctx, plot, ratio } = E.surface(canvas, COLORBAR);
    const image = ctx.createImageData(plot.w, plot.h);
    paint(image.data, plot.w, 0, 0, plot.w, plot.h, head);
    ctx.putImageData(image, plot.x, plot.y);
    const { queries, keys, qstep, kstep } = current;
    const across = cols * kstep;
    const down = rows * qstep;
    E.axes(ctx, plot, ratio,
      { low: 0, high: across, label: `key j (head ${head})`, at: (t) => (t / across) * plot.w },
      { low: 0, high: down, label: shift(queries, keys), at: (t) => (t / down) * plot.h });
    colorbar(ctx, plot, ratio, all[head]);
    canvas.head = head;
    for (const item of $("alibi-slopes").children) {
      item.setAttribute("aria-current", String(Number(item.dataset.head) === head));
    }
  }

  /** The queries' axis: query i is key position i + key_len - max_len. */
  function shift(queries, keys) {
    return keys === queries ? "query i" : `query i (at key i + ${keys - queries})`;
  }

  function colorbar(ctx, plot, ratio, { low, high }) {
    const x = plot.x + plot.w + 18 * ratio;
    const w = 14 * ratio;
    for (let py = 0; py < plot.h; py++) {
      const c = Math.round(255 * (1 - py / (plot.h - 1))) * 3;
      ctx.fillStyle = `rgb(${LUT[c]},${LUT[c + 1]},${LUT[c + 2]})`;
      ctx.fillRect(x, plot.y + py, w, 1);
    }
    ctx.fillStyle = "#1d232a";
    ctx.font = `${11 * ratio}px system-ui, "DejaVu Sans", sans-serif`;
    ctx.textBaseline = "middle";
    const label = (v) => (Number.isFinite(v) ? E.shortest(Math.fround(v)) : "—");
    ctx.fillText(label(high), x + w + 4 * ratio, plot.y);
    ctx.fillText(label(low), x + w + 4 * ratio, plot.y + plot.h - 1);
  }

  /** Every head as a tile; the canvas grows to hold them. */
  function drawHeads() {
    const canvas = $("alibi-heads");
    const { heads, slopes } = current;
    const width = canvas.getBoundingClientRect().width || TILE;
    const across = Math.max(1, Math.min(heads, Math.floor(width / TILE)));
    const side = Math.floor(width / across) - 8;
    const down = Math.ceil(heads / across);
    canvas.style.height = `${down * (side + LABEL + 8) + 4}px`;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.max(1, Math.round(width * ratio));
    canvas.height = Math.max(1, Math.round(canvas.getBoundingClientRect().height * ratio));
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    const px = Math.max(1, Math.floor(side * ratio));
    const tiles = [];
    ctx.font = `${11 * ratio}px system-ui, "DejaVu Sans", sans-serif`;
    ctx.fillStyle = "#1d232a";
    ctx.textBaseline = "bottom";
    for (let h = 0; h < heads; h++) {
      const x = Math.round(((h % across) * (side + 8) + 4) * ratio);
      const y = Math.round((Math.floor(h / across) * (side + LABEL + 8) + LABEL + 4) * ratio);
      const image = ctx.createImageData(px, px);
      paint(image.data, px, 0, 0, px, px, h);
      ctx.putImageData(image, x, y);
      const m = Number(slopes[h].toPrecision(3));
      ctx.fillText(`${h}: m = ${m}`, x, y - 2 * ratio, px); // squeezed into the tile's width
      tiles.push({ x, y, w: px, h: px });
    }
    const chosen = tiles[canvas.head = chosenHead()];
    ctx.strokeStyle = "#1d232a"; // the head drawn above
    ctx.lineWidth = 2 * ratio;
    ctx.strokeRect(chosen.x - 2 * ratio, chosen.y - 2 * ratio, chosen.w + 4 * ratio, chosen.h + 4 * ratio);
    canvas.tiles = tiles;
    canvas.ratio = ratio;
  }

  function listSlopes() {
    const { slopes } = current;
    $("alibi-slopes").replaceChildren(...Array.from(slopes, (m, h) => {
      const item = document.createElement("li");
      const power = Math.log2(m);
      const exact = Number.isInteger(power) ? ` = 2^${power}` : ` ≈ 2^${power.toFixed(3)}`;
      item.textContent = `m = ${E.shortest(m)}${exact}`;
      item.dataset.head = h;
      item.dataset.slope = E.shortest(m);
      item.title = `head ${h}: click to draw it`;
      item.addEventListener("click", () => chooseHead(h));
      return item;
    }));
  }

  function drawAll() {
    const t0 = performance.now();
    drawHead();
    drawHeads();
    return performance.now() - t0;
  }

  function chooseHead(h) {
    if (!current) return;
    $("alibi-head").value = h;
    drawHead();
    drawHeads();
    rememberInAddress(current.params);
  }

  // --- hovering -----------------------------------------------------------------------

  /** The entry of row ``a``, column ``b`` of head ``head``'s (sampled) grid. */
  function readout(event, head, a, b) {
    const { rows, cols, qstep, kstep, bias, slopes } = current;
    const v = bias[(head * rows + a) * cols + b];
    const value = Number.isFinite(v) ? E.shortest(v) : String(v);
    const [i, j] = [a * qstep, b * kstep];
    E.show(event, [
      `head ${head} (m = ${E.shortest(slopes[head])})`, `query ${i}, key ${j}`,
      Number.isFinite(v) ? `bias ${value}` : "bias -inf (masked)",
    ], { view: "alibi", head, query: i, key: j, value });
  }

  function onHead(event) {
    if (!current) return;
    const { plot, ratio, head } = event.currentTarget;
    const px = Math.floor(event.offsetX * ratio - plot.x);
    const py = Math.floor(event.offsetY * ratio - plot.y);
    if (px < 0 || py < 0 || px >= plot.w || py >= plot.h) return E.hide();
    const { rows, cols } = current;
    readout(event, head, Math.min(rows - 1, Math.floor((py * rows) / plot.h)),
      Math.min(cols - 1, Math.floor((px * cols) / plot.w)));
  }

  function tileAt(event) {
    const canvas = event.currentTarget;
    if (!canvas.tiles) return null;
    const x = event.offsetX * canvas.ratio;
    const y = event.offsetY * canvas.ratio;
    const h = canvas.tiles.findIndex((t) => x >= t.x && y >= t.y && x < t.x + t.w && y < t.y + t.h);
    if (h < 0) return null;
    const tile = canvas.tiles[h];
    return { h, fx: (x - tile.x) / tile.w, fy: (y - tile.y) / tile.h };
  }

  function onHeads(event) {
    if (!current) return;
    const at = tileAt(event);
    if (!at) return E.hide();
    const { rows, cols } = current;
    readout(event, at.h, Math.floor(at.fy * rows), Math.floor(at.fx * cols));
  }

  // --- wiring -------------------------------------------------------------------------

  function showAlibi() {
    if (!current) {
      load();
      return;
    }
    drawAll();
    rememberInAddress(current.params);
  }

  function wire() {
    restoreFromAddress();
    const reload = E.debounce(load, 200);
    $("alibi-controls").addEventListener("submit", (event) => {
      event.preventDefault();
      load();
    });
    for (const name of PARAMS) $(`alibi-${name}`).addEventListener("change", reload);
    $("alibi-head").addEventListener("input", () => current && chooseHead($("alibi-head").value));
    $("alibi-head-slider").addEventListener("input", () => chooseHead($("alibi-head-slider").value));
    $("alibi-bias").addEventListener("mousemove", onHead);
    $("alibi-heads").addEventListener("mousemove", onHeads);
    $("alibi-heads").addEventListener("click", (event) => {
      const at = tileAt(event);
      if (at) chooseHead(at.h);
    });
    for (const id of ["alibi-bias", "alibi-heads"]) $(id).addEventListener("mouseleave", E.hide);
    $("alibi-copy-curl").addEventListener("click", (event) => {
      event.preventDefault();
      if (current) E.copyText(event.currentTarget, curlCommand(current.params).command);
    });
    window.addEventListener("resize", E.debounce(() => current && E.isActive("alibi") && drawAll(), 150));
  }

  wire();
  E.register("alibi", { show: showAlibi });
})();
