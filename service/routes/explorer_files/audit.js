// The audit and compare views: each asks for a JSON answer (application/json) and draws a
// value per position band against position, log-log, with the thresholds 1e-3, 1e-2, 1e-1
// dashed. Audit: GET /v1/audit/{family}, the largest error of each computation path, and a
// table of where each first passes a threshold. Compare: POST /v1/compare, the largest
// difference of two tables and, for rotary ones, the largest drift of a pair's angle.
// A refused request takes the earlier chart down. Uses explorer.js's helpers
// (window.explorer); no libraries, no build step, no other host.
"use strict";

(() => {
  const E = window.explorer;
  const { $ } = E;
  const AUDIT = "/v1/audit";
  const COMPARE = "/v1/compare";
  // the families the view audits: its select's, each with its defaults in data-{family}
  const FAMILIES = [...$("audit-family").options].map((option) => option.value);
  const THRESHOLDS = ["1e-3", "1e-2", "1e-1"];
  const THRESHOLD = "#b2182b";
  const DRIFT = "#d95f02";
  const n = (value) => value.toLocaleString("en");
  // what each view's answer draws: its chart, and the legend and readings beside it, taken
  // down when a request is refused (explorer.js's ``refuse``)
  const drawnBy = (name, emptied) => ({
    state: $(`${name}-view`), status: `${name}-status`, problem: `${name}-problem`,
    canvases: [`${name}-plot`], emptied,
  });
  const DRAWN = {
    audit: drawnBy("audit", ["audit-legend", "audit-reach", "audit-firsts"]),
    compare: drawnBy("compare", ["compare-legend", "compare-first"]),
  };

  // {params, query, answer}: the audit drawn; {params, answer}: the comparison drawn
  let audit = null;
  let comparison = null;

  // --- loading ------------------------------------------------------------------------

  /** A JSON answer, or the service's problem as an Error. */
  async function fetchJson(url, signal, init = {}) {
    const headers = { Accept: "application/json", ...(init.headers || {}) };
    const response = await fetch(url, { ...init, headers, signal });
    if (!response.ok) throw await E.problemOf(response);
    return response.json();
  }

  /** A view's requests: the latest wins; its data-state, status and problem follow.
   *  ``run(work)`` is ``{answer, ms}``, or null when refused (shown) or overtaken. */
  function requests(name) {
    let generation = 0;
    let pending = null;
    return async (work) => {
      const mine = ++generation;
      if (pending) pending.abort();
      pending = new AbortController();
      $(`${name}-view`).dataset.state = "loading";
      $(`${name}-status`).textContent = "Loading…";
      const started = performance.now();
      try {
        const answer = await work(pending.signal);
        if (mine !== generation) return null;
        $(`${name}-problem`).hidden = true;
        return { answer, ms: performance.now() - started };
      } catch (error) {
        if (error.name !== "AbortError" && mine === generation) fail(name, error);
        return null;
      }
    };
  }

  /** A refusal shown in place of the view's chart: what an earlier request drew goes. */
  function fail(name, error) {
    E.refuse(error, DRAWN[name]);
    if (name === "audit") audit = null;
    else comparison = null;
  }

  function ready(name, data) {
    Object.assign($(`${name}-view`).dataset, { state: "ready", ...data });
  }

  // --- drawing ------------------------------------------------------------------------

  /** Ticks of a log axis at powers of ten, at most ``count`` of them. */
  function decades(low, high, count) {
    const first = Math.ceil(Math.log10(low));
    const last = Math.floor(Math.log10(high));
    const every = Math.max(1, Math.ceil((last - first + 1) / count));
    const ticks = [];
    for (let e = last; e >= first; e -= every) ticks.push(10 ** e);
    return ticks;
  }

  const power = (t) => (t === 1 ? "1" : `1e${Math.round(Math.log10(t))}`);

  /** ``series`` ([{name, color, dash, bands: [{start, stop, value}]}]) as steps over each
   *  band's positions, log-log; position 0 is left of the axis, a value of 0 at its foot. */
  function drawBands(canvas, drawn, label) {
    const { ctx, plot, ratio } = E.surface(canvas);
    const edges = drawn.flatMap((s) => s.bands.flatMap((b) => [b.start, b.stop]));
    const xLow = Math.max(1, Math.min(...edges));
    const series = dashedWhereHiding(drawn, xLow);
    const xHigh = Math.max(2 * xLow, ...edges);
    const values = series.flatMap((s) => s.bands.map((b) => b.value)).filter((v) => v > 0);
    const yLow = Math.min(1e-4, ...values) / 2;
    const yHigh = Math.max(0.2, ...values) * 2;
    const log = Math.log10;
    const xAt = (t) => ((log(t) - log(xLow)) / (log(xHigh) - log(xLow))) * plot.w;
    const yAt = (v) => ((log(yHigh) - log(Math.max(v, yLow))) / (log(yHigh) - log(yLow))) * plot.h;
    ctx.save();
    ctx.beginPath();
    ctx.rect(plot.x, plot.y, plot.w, plot.h);
    ctx.clip();
    ctx.font = `${11 * ratio}px system-ui, "DejaVu Sans", sans-serif`;
    ctx.textAlign = "left";
    ctx.textBaseline = "bottom";
    ctx.lineWidth = ratio;
    ctx.strokeStyle = THRESHOLD;
    ctx.fillStyle = THRESHOLD;
    ctx.setLineDash([5 * ratio, 4 * ratio]);
    for (const t of THRESHOLDS) {
      const y = plot.y + yAt(Number(t));
      ctx.beginPath();
      ctx.moveTo(plot.x, y);
      ctx.lineTo(plot.x + plot.w, y);
      ctx.stroke();
      ctx.fillText(t, plot.x + 4 * ratio, y - 2 * ratio);
    }
    ctx.lineWidth = 1.75 * ratio;
    for (const s of series) {
      ctx.strokeStyle = s.color;
      ctx.setLineDash((s.dash || []).map((d) => d * ratio));
      ctx.beginPath();
      let drawing = false;
      for (const { start, stop, value } of s.bands) {
        if (stop <= xLow) continue; // position 0 alone: left of a log axis
        const y = plot.y + yAt(value);
        const x = plot.x + xAt(Math.max(start, xLow));
        if (drawing) ctx.lineTo(x, y);
        else ctx.moveTo(x, y);
        ctx.lineTo(plot.x + xAt(stop), y);
        drawing = true;
      }
      ctx.stroke();
    }
    ctx.restore();
    E.axes(ctx, plot, ratio,
      { low: xLow, high: xHigh, label: "position", at: xAt, ticks: E.logTicks(xLow, xHigh),
        text: E.compact },
      { low: yLow, high: yHigh, label, at: yAt, text: power,
        ticks: decades(yLow, yHigh, Math.max(2, plot.h / (28 * ratio))) });
    Object.assign(canvas, { series, xLow, xHigh });
    return series;
  }

  function legend(element, series) {
    element.replaceChildren(...series.map((s) => {
      const item = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = s.dash && s.dash.length
        ? `repeating-linear-gradient(90deg, ${s.color} 0 5px, transparent 5px 8px)` : s.color;
      item.append(swatch, s.name);
      return item;
    }));
  }

  /** ``series`` with each one that has an earlier one's value over a drawn band dashed, so
   *  that the earlier shows between its dashes (float32-positions is library's line to
   *  2^24, bf16-positions to 256: drawn solid over it, library's line would not show). */
  function dashedWhereHiding(series, xLow) {
    return series.map((s, i) => {
      const hides = series.slice(0, i).some((earlier) => s.bands.some((b, k) => {
        const other = earlier.bands[k];
        return b.stop > xLow && other && other.start === b.start && other.value === b.value;
      }));
      return hides && !(s.dash && s.dash.length) ? { ...s, dash: [6, 4] } : s;
    });
  }

  /** Hovering a band plot: the band under the mouse, each line's value there. */
  function onBands(event) {
    const canvas = event.currentTarget;
    const { plot, ratio, series, xLow, xHigh } = canvas;
    const px = event.offsetX * ratio - (plot ? plot.x : 0);
    const py = event.offsetY * ratio - (plot ? plot.y : 0);
    if (!series || px < 0 || py < 0 || px >= plot.w || py >= plot.h) return E.hide();
    const position = Math.floor(xLow * (xHigh / xLow) ** (px / plot.w));
    const lines = [];
    const values = {};
    let band = null;
    for (const s of series) {
      const at = s.bands.find((b) => b.start <= position && position < b.stop);
      if (!at) continue;
      band = at;
      values[s.name] = at.value;
      lines.push(`${s.name}: ${at.value.toPrecision(4)}`);
    }
    if (!band) return E.hide();
    lines.unshift(`positions ${n(band.start)} .. ${n(band.stop - 1)}`);
    E.show(event, lines, {
      view: canvas.id, start: band.start, stop: band.stop, values: JSON.stringify(values),
    });
  }

  // --- the audit ----------------------------------------------------------------------

  const auditing = requests("audit");

  function auditParams() {
    return {
      family: $("audit-family").value,
      max_len: $("audit-max_len").value.trim(),
      parameters: $("audit-parameters").value.trim(),
    };
  }

  /** A pasted config.json (rotary), or null; its parameters are from-config's: the
   *  parameters field counts only when it is not a family's default. */
  function pastedConfig(params) {
    const text = $("audit-config").value.trim();
    if (text === "" || params.family !== "rotary") return null;
    try {
      JSON.parse(text);
    } catch (error) {
      throw new Error(`config.json: not JSON (${error.message})`);
    }
    const typed = FAMILIES.some((family) => defaultsOf(family) === params.parameters)
      ? "" : params.parameters;
    return { text, query: auditQuery({ ...params, parameters: typed }) };
  }

  /** The audit's query: the parameters as typed, with max_len from its own field (none
   *  for a family whose grid decides its rows; and no format: the view reads the JSON
   *  answer). */
  function auditQuery(params) {
    const search = new URLSearchParams(params.parameters.replace(/^\?/, ""));
    search.delete("format");
    if (!gridded(params.family)) search.set("max_len", params.max_len);
    return search.toString();
  }

  /** Whether ``family``'s rows are its grid's (its option says ``data-rows="grid"``): its
   *  audit takes no max_len (a 422 if sent). */
  function gridded(family) {
    const option = [...$("audit-family").options].find((o) => o.value === family);
    return Boolean(option) && option.dataset.rows === "grid";
  }

  /** max_len's field, disabled for a family that takes none. */
  function updateMaxLen() {
    $("audit-max_len").disabled = gridded($("audit-family").value);
  }

  /** ``family``'s default parameters: its ``data-{family}`` attribute, read by its name
   *  (``dataset`` would want rope-nd's as ropeNd). */
  function defaultsOf(family) {
    return $("audit-parameters").getAttribute(`data-${family}`);
  }

  /** A family chosen: its parameters replace the other family's untouched defaults. */
  function onFamily() {
    const input = $("audit-parameters");
    const defaults = FAMILIES.map(defaultsOf);
    if (input.value.trim() === "" || defaults.includes(input.value.trim())) {
      input.value = defaultsOf($("audit-family").value);
    }
    updateMaxLen();
  }

  async function loadAudit() {
    const params = auditParams();
    let config;
    try {
      config = pastedConfig(params);
    } catch (error) {
      fail("audit", error);
      return;
    }
    const query = config ? config.query : auditQuery(params);
    const family = encodeURIComponent(params.family);
    const url = config ? `${AUDIT}/${family}/from-config?${query}` : `${AUDIT}/${family}?${query}`;
    const init = config ? {
      method: "POST", body: config.text, headers: { "Content-Type": "application/json" },
    } : {};
    const done = await auditing((signal) => fetchJson(url, signal, init));
    if (!done) return;
    audit = { params, query, answer: done.answer };
    $("audit-bf16").hidden = params.family !== "rotary"; // which path a bf16 model follows
    const drawn = drawAudit();
    const { paths, parameters } = done.answer;
    $("audit-status").textContent = `${paths.length} paths, ${paths[0].bands.length} bands ` +
      `of ${n(parameters.max_len ?? parameters.rows ?? parameters.tokens)} ${gridded(params.family) ? "tokens"
        : "positions"} (${params.family}): fetched in ` +
      `${done.ms.toFixed(0)} ms, drawn in ${drawn.toFixed(1)} ms.`;
    ready("audit", { params: query, family: params.family, fetchMs: done.ms.toFixed(2),
      drawMs: drawn.toFixed(2) });
    remember("audit", params);
  }

  function drawAudit() {
    const t0 = performance.now();
    const { paths, exact_below: exact } = audit.answer;
    const series = paths.map((path, i) => ({
      name: path.name,
      color: E.LINES[i % E.LINES.length],
      dash: i < E.LINES.length ? [] : [6, 3],
      bands: path.bands.map(({ start, stop, max_error: value }) => ({ start, stop, value })),
    }));
    legend($("audit-legend"), drawBands($("audit-plot"), series, "largest error per band"));
    $("audit-reach").textContent = exact === undefined ? ""
      : `first crossings exact below ${n(exact)} (past it, refined between samples)`;
    listFirsts(paths);
    return performance.now() - t0;
  }

  function listFirsts(paths) {
    const cell = (value, name) => {
      const td = document.createElement("td");
      td.textContent = value === null || value === undefined ? "—" : n(value);
      td.dataset.name = name;
      td.dataset.value = String(value ?? "");
      return td;
    };
    $("audit-firsts").replaceChildren(...paths.map((path, i) => {
      const row = document.createElement("tr");
      const name = document.createElement("th");
      const swatch = document.createElement("i");
      swatch.style.background = E.LINES[i % E.LINES.length];
      name.append(swatch, path.name);
      name.title = path.description || "";
      row.dataset.path = path.name;
      row.append(name, ...THRESHOLDS.map((t) => cell(path.first_over[t], t)),
        cell(path.first_misdirected, "misdirected"));
      return row;
    }));
  }

  // --- the comparison -----------------------------------------------------------------

  const comparing = requests("compare");

  function compareParams() {
    const params = {};
    for (const name of ["a", "b", "start", "stop"]) params[name] = $(`compare-${name}`).value.trim();
    return params;
  }

  /** The body posted: the two tables as typed (JSON), and the positions. */
  function body(params) {
    const asked = {};
    for (const name of ["a", "b"]) {
      try {
        asked[name] = JSON.parse(params[name]);
      } catch (error) {
        throw new Error(`table ${name}: not JSON (${error.message})`);
      }
    }
    for (const name of ["start", "stop"]) if (params[name] !== "") asked[name] = Number(params[name]);
    return JSON.stringify(asked);
  }

  async function loadCompare() {
    const params = compareParams();
    const done = await comparing(async (signal) => fetchJson(COMPARE, signal, {
      method: "POST", body: body(params), headers: { "Content-Type": "application/json" },
    }));
    if (!done) return;
    comparison = { params, answer: done.answer };
    const drawn = drawCompare();
    const { bands, start, stop } = done.answer;
    $("compare-status").textContent = `${bands.length} bands of positions ${n(start)} .. ` +
      `${n(stop - 1)}: fetched in ${done.ms.toFixed(0)} ms, drawn in ${drawn.toFixed(1)} ms.`;
    ready("compare", { firstOver: JSON.stringify(done.answer.first_over),
      fetchMs: done.ms.toFixed(2), drawMs: drawn.toFixed(2) });
    remember("compare", params);
  }

  function drawCompare() {
    const t0 = performance.now();
    const { bands, first_over: first, start } = comparison.answer;
    const series = [{
      name: "largest difference", color: E.LINES[0],
      bands: bands.map((b) => ({ start: b.start, stop: b.stop, value: b.max_difference })),
    }];
    if (bands.length && "max_angle_drift" in bands[0]) {
      series.push({
        name: "largest angle drift (radians)", color: DRIFT, dash: [6, 3],
        bands: bands.map((b) => ({ start: b.start, stop: b.stop, value: b.max_angle_drift })),
      });
    }
    legend($("compare-legend"), drawBands($("compare-plot"), series, "largest per band"));
    const said = THRESHOLDS.map((t) => {
      const at = first[t];
      if (at === null || at === undefined) return `${t} never`;
      return `${t} at ${n(at)}${at < start ? " (below start)" : ""}`;
    });
    $("compare-first").textContent = `the difference first passes ${said.join(", ")}`;
    return performance.now() - t0;
  }

  // --- wiring -------------------------------------------------------------------------

  const controls = {
    audit: ["family", "max_len", "parameters"],
    compare: ["a", "b", "start", "stop"],
  };

  function restoreFromAddress() {
    const search = new URLSearchParams(location.search);
    const view = search.get("view");
    if (!Object.hasOwn(controls, view)) return;
    for (const name of controls[view]) {
      if (search.has(name)) $(`${view}-${name}`).value = search.get(name);
    }
  }

  function remember(view, params) {
    if (!E.isActive(view)) return;
    history.replaceState(null, "", `?${new URLSearchParams({ view, ...params })}`);
  }

  function wire(view, load, draw, current) {
    $(`${view}-controls`).addEventListener("submit", (event) => {
      event.preventDefault();
      load();
    });
    const reload = E.debounce(load, 250);
    for (const control of $(`${view}-controls`).querySelectorAll("input, select")) {
      control.addEventListener("change", reload);
    }
    $(`${view}-plot`).addEventListener("mousemove", onBands);
    $(`${view}-plot`).addEventListener("mouseleave", E.hide);
    window.addEventListener("resize", E.debounce(() => current() && E.isActive(view) && draw(), 150));
    E.register(view, {
      show() {
        if (!current()) {
          load();
          return;
        }
        draw(); // canvases drawn while hidden have no size
        remember(view, current().params);
      },
    });
  }

  restoreFromAddress();
  updateMaxLen();
  $("audit-family").addEventListener("change", onFamily);
  wire("audit", loadAudit, drawAudit, () => audit);
  wire("compare", loadCompare, drawCompare, () => comparison);
})();
