// The vision towers' RoPE view: a vision tower's 2-D rotary table (GET
// /v1/encodings/vision-rotary), fetched raw (little-endian float32 of shape (2, tokens,
// head_dim), cos then sin) and drawn as the angle of each pair at each token in the model's
// token order, and as one pair's angle at each patch of the image, each row drawn where its
// patch is. Below, for a Qwen-VL layout (POST /v1/positions/mrope's body): each image's
// tokens with the language model's (t, h, w) ids and the vision tower's rows and patches
// they merge. The model's parameters are the service's (explorer.js's familyPresets); the
// token order (``patchOf``) is service/encodings/vision_rotary.py's ``patches``. Uses
// explorer.js's helpers (window.explorer); no libraries, no build step, no other host.
"use strict";

(() => {
  // --- the models' token order, as the service's ``vision_rotary.patches`` ---------------

  // each model's rows: Qwen-VL's blocks of spatial_merge_size² patches, block-major; the
  // others' patches row-major (Llama 4's class token last)
  const ORDER = {
    qwen2_vl: "blocks", qwen2_5_vl: "blocks", qwen3_vl: "blocks", pixtral: "rows",
    llama4: "class", dinov3: "rows", eva02: "rows",
  };

  /** Qwen2.5-VL's window order: the merged token (row, column) at place ``order`` of a
   *  frame (``get_vision_window_index``'s windows of window_size / merge / patch merged
   *  tokens a side, row-major, each row-major inside; the last ones cut short). */
  function windowed(key, order) {
    const m = key.spatial_merge_size;
    const side = Math.floor(Math.floor(key.window_size / m) / key.patch_size);
    const rows = key.grid[1] / m;
    const columns = key.grid[2] / m;
    const band = Math.floor(order / (side * columns));
    const place = order % (side * columns);
    const high = Math.min(side, rows - band * side);
    const window = Math.floor(place / (high * side));
    const inside = place % (high * side);
    const wide = Math.min(side, columns - window * side);
    return [band * side + Math.floor(inside / wide), window * side + (inside % wide)];
  }

  /** [row, column] of the patch of row ``r`` of the table ``key`` resolves (the JSON
   *  answer's model, grid, spatial_merge_size, window_index, window_size, patch_size);
   *  Llama 4's class token [-1, -1]. */
  function patchOf(key, r) {
    const [, h, w] = key.grid;
    const order = ORDER[key.model];
    if (order !== "blocks") {
      if (order === "class" && r >= h * w) return [-1, -1];
      const within = r % (h * w);
      return [Math.floor(within / w), within % w];
    }
    const m = key.spatial_merge_size;
    const block = Math.floor(r / (m * m));
    const sub = r % (m * m);
    const within = block % ((h / m) * (w / m));
    const [row, column] = key.window_index ? windowed(key, within)
      : [Math.floor(within / (w / m)), within % (w / m)];
    return [row * m + Math.floor(sub / m), column * m + (sub % m)];
  }

  /** A Qwen-VL layout's images, each ``{segment, grid, first, firstRow, tokens}``: its
   *  tokens from sequence index ``first`` (``answer``: POST /v1/positions/mrope's JSON), each
   *  ``{token, ids, merged, rows, patches}``: the language model's (t, h, w) ids, the merged
   *  token (frame, row, column), the vision tower's rows (``[from, to)``: the tower takes the
   *  images' patches one after the other from ``firstRow``, spatial_merge_size² a merged
   *  token, in its plain block order, which its merger's output keeps) and their patches. */
  function imageTokens(layout, answer) {
    const m = answer.spatial_merge_size;
    const images = [];
    let at = 0;
    let row = 0;
    layout.segments.forEach((segment, s) => {
      if (segment.image == null && segment.video == null) {
        at += segment.text;
        return;
      }
      const [t, h, w] = segment.image || segment.video;
      const frame = (h / m) * (w / m);
      if (segment.video) {
        const between = answer.model === "qwen3_vl" ? (segment.frame_text || 0) * (t - 1) : 0;
        at += t * frame + between;
        return;
      }
      const key = { model: answer.model, grid: [t, h, w], spatial_merge_size: m };
      const tokens = [];
      for (let j = 0; j < t * frame; j++) {
        const rest = j % frame;
        const rows = [j * m * m, (j + 1) * m * m];
        const patches = [];
        for (let r = rows[0]; r < rows[1]; r++) patches.push(patchOf(key, r));
        tokens.push({
          token: at + j,
          ids: answer.position_ids.map((axis) => axis[at + j]),
          merged: [Math.floor(j / frame), Math.floor(rest / (w / m)), rest % (w / m)],
          rows: rows.map((r) => row + r),
          patches,
        });
      }
      images.push({ segment: s, grid: [t, h, w], first: at, firstRow: row, tokens });
      at += t * frame;
      row += t * h * w;
    });
    return images;
  }

  window.visionTower = { patchOf, imageTokens };
  const E = window.explorer;
  if (!E) return; // read for its functions alone (the tests' Node)

  const { $ } = E;
  const VIEW = "vision";
  const TABLE = "/v1/encodings/vision-rotary";
  const MROPE = "/v1/positions/mrope";
  const BASIC = ["model", "grid", "rounding"];
  const INTERLEAVED = ["llama4", "eva02"]; // the others rotate halves: (i, i + d/2)
  const SHOWN = 64; // an image's tokens listed (the rest said)
  const n = (value) => value.toLocaleString("en");

  // {params, key, rows, plan, angles, pairs, cells}: row r of the tables is token
  // r × plan.step; key is the service's resolved table; cells the patches' angles (every
  // token held) or null
  let current = null;
  let generation = 0;
  let pending = null;
  let mapping = 0;
  const DRAWN = {
    state: $(`${VIEW}-view`), status: `${VIEW}-status`, problem: `${VIEW}-problem`,
    canvases: [`${VIEW}-heatmap`, `${VIEW}-grid-angles`],
    emptied: [`${VIEW}-grid-note`], hidden: [`${VIEW}-sampling`, `${VIEW}-links`],
  };

  // --- parameters ---------------------------------------------------------------------

  function parameterControls() {
    return [...$(`${VIEW}-parameters`).querySelectorAll("input, select")];
  }

  /** The form as it stands: the model, grid and rounding, and the non-blank parameters the
   *  model takes (one it does not would be refused). */
  function readParams() {
    const params = {};
    for (const name of BASIC) {
      const control = name === "model" ? $(`${VIEW}-preset`) : $(`${VIEW}-${name}`);
      params[name] = control.value.trim();
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

  function tableCurl(params, key) {
    return E.curlCommand({
      address: (range) => `${TABLE}?${query(params, { ...range, format: "npz" })}`,
      file: "vision-rotary.npz",
      start: 0,
      stop: key.tokens,
      width: 2 * key.head_dim,
    });
  }

  function restoreFromAddress() {
    const search = new URLSearchParams(location.search);
    if (search.get("view") !== VIEW) return;
    for (const [name, value] of search) {
      const control = name === "model" ? $(`${VIEW}-preset`) : $(`${VIEW}-${name}`);
      if (name === "view" || !control || !("value" in control)) continue;
      if (control.options && ![...control.options].some((o) => o.value === value)) {
        control.append(new Option(value, value));
      }
      control.value = value;
    }
  }

  function rememberInAddress() {
    if (!E.isActive(VIEW) || !current) return;
    const search = new URLSearchParams({
      view: VIEW, ...current.params, pair: $(`${VIEW}-pair`).value,
    });
    history.replaceState(null, "", `?${search}`);
  }

  // --- the table ----------------------------------------------------------------------

  async function keyOf(params, signal) {
    const url = `${TABLE}?${query(params, { start: 0, stop: 1, format: "json" })}`;
    const response = await fetch(url, { headers: { Accept: "application/json" }, signal });
    if (!response.ok) throw await E.problemOf(response);
    return response.json();
  }

  /** The column of pair i's cos: the interleaved models' pairs are (2i, 2i+1). */
  function columnOf(key, i) {
    return INTERLEAVED.includes(key.model) ? 2 * i : i;
  }

  function anglesOf(key, cos, sin, rows) {
    const pairs = key.head_dim / 2;
    const angles = new Float32Array(rows * pairs);
    for (let r = 0; r < rows; r++) {
      for (let i = 0; i < pairs; i++) {
        const c = r * key.head_dim + columnOf(key, i);
        angles[r * pairs + i] = Math.atan2(sin[c], cos[c]);
      }
    }
    return angles;
  }

  /** Each patch's angles (a frame's: the first), from the table's rows placed where their
   *  patches are; null when the page holds every step-th token only. */
  function cellsOf(key, angles, plan) {
    if (plan.step !== 1) return null;
    const [, h, w] = key.grid;
    const pairs = key.head_dim / 2;
    const cells = new Float32Array(h * w * pairs);
    const tokenAt = new Int32Array(h * w);
    for (let r = key.tokens - 1; r >= 0; r--) {
      const [i, j] = patchOf(key, r);
      if (i < 0) continue;
      cells.set(angles.subarray(r * pairs, (r + 1) * pairs), (i * w + j) * pairs);
      tokenAt[i * w + j] = r; // the first frame's row wins
    }
    return { cells, tokenAt };
  }

  function said(key, r) {
    const [i, j] = patchOf(key, r);
    if (i < 0) return `token ${r}: the class token (unturned)`;
    const m = key.spatial_merge_size;
    const block = ORDER[key.model] === "blocks" ? `, merged token ${Math.floor(r / (m * m))}` : "";
    return `token ${r}: patch (${i}, ${j})${block}`;
  }

  function chosen(name, last) {
    const value = Math.min(Math.max(0, Math.round(Number($(`${VIEW}-${name}`).value) || 0)), last);
    for (const control of [$(`${VIEW}-${name}`), $(`${VIEW}-${name}-slider`)]) {
      control.max = last;
      control.value = value;
    }
    return value;
  }

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
      const { blocks: [cos, sin], rows } = await E.fetchRows(plan, url, signal);
      if (mine !== generation) return;
      const fetched = performance.now() - started;
      const angles = anglesOf(key, cos, sin, rows);
      current = {
        params, key, rows, plan, angles, pairs: key.head_dim / 2,
        cells: cellsOf(key, angles, plan),
      };
      const drawn = drawAll();
      $(`${VIEW}-problem`).hidden = true;
      $(`${VIEW}-sampling`).textContent = plan.step === 1 ? ""
        : `${E.samplingNote(plan).replaceAll("position", "token")} The patches' picture ` +
          "needs every token: ask for a smaller grid.";
      $(`${VIEW}-sampling`).hidden = plan.step === 1;
      $(`${VIEW}-status`).textContent = `cos and sin, ${n(key.tokens)} tokens × ` +
        `${key.head_dim}, float32: model ${key.model}, a ${key.grid.join(" × ")} grid; ` +
        `fetched in ${fetched.toFixed(0)} ms, drawn in ${drawn.toFixed(1)} ms.`;
      Object.assign(view.dataset, {
        state: "ready", params: query(params), step: plan.step, tokens: key.tokens,
      });
      const curl = tableCurl(params, key);
      $(`${VIEW}-curl`).textContent = curl.command;
      $(`${VIEW}-copy-curl`).href = curl.url || "#";
      const { rounding, ...rest } = params; // the audit compares both roundings
      $(`${VIEW}-audit`).href = `/?${new URLSearchParams({
        view: "audit", family: "vision-rotary", parameters: query(rest),
      })}`;
      $(`${VIEW}-links`).hidden = false;
      rememberInAddress();
    } catch (error) {
      if (error.name === "AbortError" || mine !== generation) return;
      E.refuse(error, DRAWN);
      current = null;
    }
  }

  // --- drawing ------------------------------------------------------------------------

  function drawAll() {
    const t0 = performance.now();
    const { rows, pairs, angles, plan } = current;
    E.drawGrid($(`${VIEW}-heatmap`), {
      rows, cols: pairs, table: angles, rowHigh: rows * plan.step, rowLabel: "token",
      colLabel: "pair", scale: E.ANGLES,
    });
    drawCells();
    return performance.now() - t0;
  }

  /** The chosen pair's angle at each patch, each token's row drawn where its patch is. */
  function drawCells() {
    const { key, pairs, cells } = current;
    const [, h, w] = key.grid;
    const p = chosen("pair", pairs - 1);
    const canvas = $(`${VIEW}-grid-angles`);
    if (!cells) {
      $(`${VIEW}-grid-note`).textContent = "The table is sampled: no picture of the patches.";
      canvas.shape = null;
      return;
    }
    const image = new Float32Array(h * w);
    for (let c = 0; c < h * w; c++) image[c] = cells.cells[c * pairs + p];
    const plotWidth = canvas.parentElement.clientWidth - (58 + 16 + 64);
    const high = Math.min(640, Math.max(160, (plotWidth * h) / w));
    canvas.style.height = `${Math.round(high + 12 + 40)}px`;
    E.drawGrid(canvas, {
      rows: h, cols: w, table: image, rowHigh: h, rowLabel: "patch row",
      colLabel: "patch column", scale: E.ANGLES,
    });
    const frames = ORDER[key.model] === "blocks" && key.grid[0] > 1 ? " (the first frame)" : "";
    $(`${VIEW}-grid-note`).textContent = `pair ${p} at each of the ${h} × ${w} patches${frames}`;
    Object.assign(canvas, { shape: [h, w], pair: p });
  }

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
    const { rows, pairs, angles, plan, key } = current;
    const at = cellAt(event.currentTarget, event, rows, pairs);
    if (!at) return E.hide();
    const value = E.shortest(angles[at.row * pairs + at.col]);
    const token = at.row * plan.step;
    E.show(event, [said(key, token), `pair ${at.col}`, `angle ${value}`], {
      view: event.currentTarget.id, position: token, pair: at.col, value,
    });
  }

  function onCells(event) {
    if (!current || !current.cells) return;
    const canvas = event.currentTarget;
    const { key, cells, pairs } = current;
    const at = cellAt(canvas, event, ...canvas.shape);
    if (!at) return E.hide();
    const c = at.row * key.grid[2] + at.col;
    const token = cells.tokenAt[c];
    const value = E.shortest(cells.cells[c * pairs + canvas.pair]);
    E.show(event, [said(key, token), `pair ${canvas.pair}: angle ${value}`], {
      view: canvas.id, position: token, row: at.row, column: at.col, pair: canvas.pair, value,
    });
  }

  // --- a layout's language-model ids and vision-tower rows ----------------------------

  function cell(tag, text) {
    const element = document.createElement(tag);
    element.textContent = text;
    return element;
  }

  /** The images of the layout: a table each, a row a merged token. */
  function showImages(images, answer) {
    const m = answer.spatial_merge_size;
    const out = $(`${VIEW}-images`);
    out.replaceChildren();
    if (!images.length) out.append(cell("p", "The layout has no image."));
    images.forEach((image, k) => {
      const [t, h, w] = image.grid;
      const count = image.tokens.length;
      out.append(cell("h3", `Image ${k} (segment ${image.segment}): ${t} × ${h} × ${w} ` +
        `patches, ${n(count)} tokens from sequence index ${n(image.first)}; the tower's rows ` +
        `${n(image.firstRow)}–${n(image.firstRow + t * h * w - 1)}, ${m * m} a token`));
      const table = document.createElement("table");
      table.className = `${VIEW}-image`;
      const head = document.createElement("tr");
      for (const title of ["token", "ids (t, h, w)", "merged (frame, row, column)",
        "vision rows", "patches (row, column)"]) head.append(cell("th", title));
      table.append(head);
      for (const token of image.tokens.slice(0, SHOWN)) {
        const line = document.createElement("tr");
        line.append(cell("td", token.token), cell("td", token.ids.join(", ")),
          cell("td", token.merged.join(", ")),
          cell("td", `${token.rows[0]}–${token.rows[1] - 1}`),
          cell("td", token.patches.map(([i, j]) => `(${i}, ${j})`).join(" ")));
        table.append(line);
      }
      out.append(table);
      if (count > SHOWN) out.append(cell("p", `… and ${n(count - SHOWN)} more tokens.`));
    });
  }

  async function mapLayout() {
    const mine = ++mapping;
    const status = $(`${VIEW}-mrope-status`);
    const problem = $(`${VIEW}-mrope-problem`);
    const out = $(`${VIEW}-images`);
    try {
      let layout;
      try {
        layout = JSON.parse($(`${VIEW}-layout`).value);
      } catch (error) {
        throw new Error(`The layout is not JSON: ${error.message}`);
      }
      status.textContent = "Asking for the position ids…";
      const response = await fetch(MROPE, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(layout),
      });
      if (!response.ok) throw await E.problemOf(response);
      const answer = await response.json();
      if (mine !== mapping) return;
      const images = imageTokens(layout, answer);
      showImages(images, answer);
      problem.hidden = true;
      status.textContent = `${answer.model}, spatial_merge_size ${answer.spatial_merge_size}: ` +
        `${n(answer.length)} tokens, ${images.length} image${images.length === 1 ? "" : "s"}.`;
      out.dataset.images = JSON.stringify(images.map((image) => ({
        first: image.first, firstRow: image.firstRow, tokens: image.tokens.length,
      })));
      $(`${VIEW}-mrope`).dataset.state = "ready";
    } catch (error) {
      if (mine !== mapping) return;
      status.textContent = "";
      problem.textContent = error.message;
      problem.hidden = false;
      out.replaceChildren();
      $(`${VIEW}-mrope`).dataset.state = "error";
    }
  }

  // --- wiring -------------------------------------------------------------------------

  restoreFromAddress();
  const ready = E.familyPresets("vision-rotary", VIEW, parameterControls());
  $(`${VIEW}-controls`).addEventListener("submit", (event) => {
    event.preventDefault();
    load();
  });
  const reload = E.debounce(load, 200);
  for (const control of $(`${VIEW}-controls`).querySelectorAll("input, select")) {
    control.addEventListener("change", reload);
  }
  const redrawCells = () => {
    if (!current) return;
    drawCells();
    rememberInAddress();
  };
  $(`${VIEW}-pair`).addEventListener("input", redrawCells);
  $(`${VIEW}-pair-slider`).addEventListener("input", () => {
    $(`${VIEW}-pair`).value = $(`${VIEW}-pair-slider`).value;
    redrawCells();
  });
  $(`${VIEW}-heatmap`).addEventListener("mousemove", onHeatmap);
  $(`${VIEW}-grid-angles`).addEventListener("mousemove", onCells);
  for (const id of ["heatmap", "grid-angles"]) {
    $(`${VIEW}-${id}`).addEventListener("mouseleave", E.hide);
  }
  $(`${VIEW}-copy-curl`).addEventListener("click", async (event) => {
    event.preventDefault();
    if (current) await E.copyText(event.currentTarget, tableCurl(current.params, current.key).command);
  });
  $(`${VIEW}-mrope`).addEventListener("submit", (event) => {
    event.preventDefault();
    mapLayout();
  });
  window.addEventListener("resize", E.debounce(() => current && E.isActive(VIEW) && drawAll(), 150));
  E.register(VIEW, {
    async show() {
      await ready;
      if (!current) {
        load();
        mapLayout();
        return;
      }
      drawAll();
      rememberInAddress();
    },
  });
})();
