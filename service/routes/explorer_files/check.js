// The "Check my table" view: a .npy file the user drops or picks (a table their own code
// made) is posted as it is (application/x-npy) to POST /v1/verify with a claim (a family and
// its GET parameters, as a query string), or to POST /v1/identify with none. The view lists
// the match, the difference by band (a bar each, log scale) and each diagnosis, with a link
// to the GET that produces what was posted. The file's .npy header is read here first, so
// that a file the service would refuse for its form is said so without a request. Uses
// explorer.js's helpers (window.explorer); no libraries, no build step, no other host.
"use strict";

(() => {
  const E = window.explorer;
  const { $ } = E;
  const VERIFY = "/v1/verify";
  const IDENTIFY = "/v1/identify";
  const NPY = "application/x-npy";
  const THRESHOLDS = ["1e-3", "1e-2", "1e-1"];
  // the bars' log scale: a difference of FLOOR or less is no bar, one of 2 (cos against -cos)
  // the whole width
  const FLOOR = 1e-9;
  const CONTROLS = ["mode", "claim"];
  const DRAWN = {
    state: $("check-view"), status: "check-status", problem: "check-problem",
    emptied: ["check-match", "check-firsts", "check-bands", "check-diagnoses", "check-candidates"],
  };
  const n = (value) => value.toLocaleString("en");

  // {name, bytes, shape, descr}: the file chosen; {params, answer}: the answer shown
  let table = null;
  let checked = null;
  let generation = 0;
  let pending = null;

  // --- the file -----------------------------------------------------------------------

  /** The form of a .npy file's array ({descr, shape}), read from its header (format
   *  versions 1 to 3); an Error naming what is wrong with it. Only little-endian float32
   *  and float64 arrays in C order, (L, d) or (2, L, d) (cos and sin stacked), are tables. */
  function npyHeader(bytes) {
    const magic = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY
    if (bytes.length < 10 || magic.some((b, i) => bytes[i] !== b)) {
      throw new Error("table: not an .npy file (it does not start with the .npy magic)");
    }
    const data = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const major = bytes[6];
    if (major < 1 || major > 3) throw new Error(`table: .npy format version ${major} is unknown`);
    const wide = major >= 2;
    const length = wide ? data.getUint32(8, true) : data.getUint16(8, true);
    const offset = wide ? 12 : 10;
    if (offset + length > bytes.length) throw new Error("table: the .npy header is cut short");
    const text = new TextDecoder(major === 3 ? "utf-8" : "latin1")
      .decode(bytes.subarray(offset, offset + length));
    const descr = /'descr':\s*'([^']*)'/.exec(text);
    const order = /'fortran_order':\s*(True|False)/.exec(text);
    const shape = /'shape':\s*\(([^)]*)\)/.exec(text);
    if (!descr || !order || !shape) throw new Error("table: the .npy header is malformed");
    const dims = shape[1].split(",").map((s) => s.trim()).filter(Boolean).map(Number);
    if (!["<f4", "<f8"].includes(descr[1])) {
      throw new Error(`table: holds ${descr[1]}, not little-endian float32 (<f4) or float64 (<f8)`);
    }
    if (order[1] === "True") throw new Error("table: is in Fortran order; save it in C order");
    const isTable = (dims.length === 2 || (dims.length === 3 && dims[0] === 2)) &&
      dims.every((d) => Number.isInteger(d) && d > 0);
    if (!isTable) {
      throw new Error(`table: its shape (${dims.join(", ")}) is not (L, d) nor (2, L, d)`);
    }
    const size = dims.reduce((a, b) => a * b, 1) * (descr[1] === "<f4" ? 4 : 8);
    if (offset + length + size !== bytes.length) {
      throw new Error(`table: holds ${bytes.length - offset - length} bytes of data, not ${size}`);
    }
    return { descr: descr[1], shape: dims };
  }

  async function choose(file) {
    if (!file) return;
    const bytes = new Uint8Array(await file.arrayBuffer());
    try {
      table = { name: file.name, bytes, ...npyHeader(bytes) };
    } catch (error) {
      table = null;
      fail(error);
      return;
    }
    const dtype = table.descr === "<f4" ? "float32" : "float64";
    const form = table.shape.length === 3 ? "cos and sin" : "one array";
    $("check-file-said").textContent =
      `${file.name}: ${dtype}, (${table.shape.join(", ")}), ${form}`;
    load();
  }

  // --- loading ------------------------------------------------------------------------

  /** The request the form says: its address and the parameters kept in the page's. */
  function request() {
    const mode = $("check-mode").value === "identify" ? "identify" : "verify";
    const claim = $("check-claim").value.trim().replace(/^\?/, "");
    if (mode === "identify") return { url: IDENTIFY, params: { mode } };
    const search = new URLSearchParams(claim);
    search.delete("format"); // whatever the claim says: the JSON
    return { url: `${VERIFY}?${search}`, params: { mode, claim } };
  }

  async function load() {
    $("check-claim-box").hidden = $("check-mode").value === "identify";
    if (!table) {
      DRAWN.state.dataset.state = "idle";
      $("check-status").textContent = "Drop a .npy file here, or pick one.";
      remember(request().params);
      return;
    }
    const { url, params } = request();
    const mine = ++generation;
    if (pending) pending.abort();
    pending = new AbortController();
    DRAWN.state.dataset.state = "loading";
    $("check-status").textContent = "Checking…";
    const started = performance.now();
    try {
      const response = await fetch(url, {
        method: "POST",
        headers: { Accept: "application/json", "Content-Type": NPY },
        body: table.bytes,
        signal: pending.signal,
      });
      if (!response.ok) throw await E.problemOf(response);
      const answer = await response.json();
      if (mine !== generation) return;
      $("check-problem").hidden = true;
      checked = { params, answer };
      const ms = performance.now() - started;
      draw();
      $("check-status").textContent =
        `${table.name}: ${params.mode === "identify" ? "identified" : "verified"} in ${Math.round(ms)} ms`;
    } catch (error) {
      if (error.name !== "AbortError" && mine === generation) fail(error);
    }
  }

  /** A refusal (the service's, or the file's form) in place of what was shown. */
  function fail(error) {
    E.refuse(error, DRAWN);
    checked = null;
  }

  // --- drawing ------------------------------------------------------------------------

  const getUrl = (family, parameters) => {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(parameters)) search.set(name, String(value));
    return `/v1/encodings/${family}?${search}`;
  };

  function link(family, parameters) {
    const a = document.createElement("a");
    a.href = getUrl(family, parameters);
    a.textContent = `GET ${a.getAttribute("href")}`;
    return a;
  }

  // three digits are enough to read; the exact value is the cell's data-value
  const difference = (value) =>
    (value === null || value === undefined ? "—" : String(Number(value.toPrecision(3))));

  function cell(text, data = {}) {
    const td = document.createElement("td");
    if (text instanceof Node) td.append(text);
    else td.textContent = text;
    Object.assign(td.dataset, data);
    return td;
  }

  /** A bar as long as the difference on a log scale from FLOOR to 2. */
  function bar(value) {
    const span = document.createElement("span");
    span.className = "bar";
    const share = value > FLOOR ? Math.log10(value / FLOOR) / Math.log10(2 / FLOOR) : 0;
    span.style.width = `${(100 * Math.min(1, share)).toFixed(1)}%`;
    return span;
  }

  function listBands(bands) {
    const drift = bands.some((b) => b.max_angle_drift !== undefined);
    $("check-drift-head").hidden = !drift;
    $("check-bands").replaceChildren(...bands.map((b) => {
      const row = document.createElement("tr");
      row.dataset.start = String(b.start);
      const name = document.createElement("th");
      name.textContent = `${n(b.start)} – ${n(b.stop - 1)}`;
      row.append(
        name,
        cell(n(b.rows)),
        cell(difference(b.max_difference), { name: "max", value: String(b.max_difference) }),
        cell(difference(b.mean_difference), { name: "mean", value: String(b.mean_difference) }),
      );
      if (drift) row.append(cell(difference(b.max_angle_drift), { name: "drift" }));
      const track = document.createElement("span");
      track.className = "track";
      track.append(bar(b.max_difference));
      row.append(cell(track));
      return row;
    }));
  }

  function listFirsts(answer) {
    const first = answer.first_over || {};
    const said = THRESHOLDS.filter((t) => t in first).map((t) =>
      (first[t] === null ? `${t} never` : `${t} at ${n(first[t])}`));
    const parts = said.length ? [`the difference first passes ${said.join(", ")}`] : [];
    if (answer.first_wrong_way !== undefined && answer.first_wrong_way !== null) {
      parts.push(`a pair first points the wrong way at ${n(answer.first_wrong_way)}`);
    }
    if (answer.non_finite) {
      parts.push(`${n(answer.non_finite.entries)} entries not finite, first at ` +
        answer.non_finite.first_positions.map(n).join(", "));
    }
    if (answer.shape) {
      parts.push(`the table is ${n(answer.shape.posted_width)} wide, the claim's ` +
        `${n(answer.shape.claimed_width)}`);
    }
    $("check-firsts").textContent = parts.join("; ");
  }

  function listDiagnoses(diagnoses, match) {
    if (!diagnoses.length) {
      const li = document.createElement("li");
      li.textContent = match === "different"
        ? "No known mistake alone explains the difference: try identify."
        : "Nothing to diagnose: the table is the claim's.";
      $("check-diagnoses").replaceChildren(li);
      return;
    }
    $("check-diagnoses").replaceChildren(...diagnoses.map((d) => {
      const li = document.createElement("li");
      li.dataset.mistake = d.mistake;
      li.dataset.from = String(d.from_position ?? "");
      const name = document.createElement("strong");
      name.textContent = d.mistake;
      const from = d.from_position === null || d.from_position === undefined
        ? "" : `, from position ${n(d.from_position)}`;
      const left = d.max_error === null || d.max_error === undefined
        ? "" : `; left once corrected: ${difference(d.max_error)}`;
      const said = document.createElement("span");
      const description = d.description.replace(/\.$/, "");
      said.textContent = `: ${description}${from}${left}. The table posted is `;
      li.append(name, said, link(d.family, d.parameters));
      return li;
    }));
  }

  function listCandidates(candidates) {
    $("check-candidates").replaceChildren(...candidates.map((c, i) => {
      const li = document.createElement("li");
      li.dataset.family = c.family;
      li.dataset.match = c.match;
      const said = document.createElement("span");
      said.textContent = `${c.match}, largest difference ${difference(c.max_error)}: `;
      li.append(said, link(c.family, c.parameters));
      if (i === 0) li.className = "best";
      return li;
    }));
  }

  function draw() {
    const { params, answer } = checked;
    const identifying = params.mode === "identify";
    const best = identifying ? answer.candidates[0] : answer;
    const match = identifying ? (answer.matched ? best.match : "different") : answer.match;
    const shown = $("check-match");
    shown.dataset.match = match;
    shown.textContent = identifying
      ? (answer.matched
        ? `${match}: ${best.family}, the best of ${n(answer.tried)} tried`
        : `nothing known matches (${n(answer.tried)} tried): the nearest below`)
      : `${match} (the claim: ${answer.claim.family})`;
    if (!identifying) shown.append(" ", link(answer.claim.family, answer.claim.parameters));
    listFirsts(best || {});
    listBands(best ? best.bands : []);
    $("check-diagnoses-box").hidden = identifying;
    $("check-candidates-box").hidden = !identifying;
    if (identifying) listCandidates(answer.candidates);
    else listDiagnoses(answer.diagnoses, answer.match);
    Object.assign(DRAWN.state.dataset, {
      state: "ready",
      match,
      params: new URLSearchParams(params).toString(),
      diagnoses: identifying ? "" : answer.diagnoses.map((d) => d.mistake).join(","),
    });
    remember(params);
  }

  // --- wiring -------------------------------------------------------------------------

  function restoreFromAddress() {
    const search = new URLSearchParams(location.search);
    if (search.get("view") !== "check") return;
    for (const name of CONTROLS) {
      if (search.has(name)) $(`check-${name}`).value = search.get(name);
    }
  }

  function remember(params) {
    if (!E.isActive("check")) return;
    history.replaceState(null, "", `?${new URLSearchParams({ view: "check", ...params })}`);
  }

  restoreFromAddress();
  $("check-controls").addEventListener("submit", (event) => {
    event.preventDefault();
    load();
  });
  $("check-file").addEventListener("change", (event) => choose(event.target.files[0]));
  $("check-mode").addEventListener("change", load);
  $("check-claim").addEventListener("change", E.debounce(load, 250));
  const drop = $("check-drop");
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    choose(event.dataTransfer.files[0]);
  });
  E.register("check", {
    show() {
      if (checked) draw();
      else load();
    },
  });
})();
