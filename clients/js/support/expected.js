// The formulas the answers are checked against, in float64.

/** The paper's table, rows start .. stop-1, `[rows * d]`. */
export function sinusoidal(start, stop, d, base = 10000, layout = "interleaved") {
  const out = new Float64Array((stop - start) * d);
  const half = Math.ceil(d / 2);
  for (let p = start; p < stop; p++) {
    for (let k = 0; k < d; k++) {
      const pair = Math.floor(k / 2);
      const angle = p * base ** ((-2 * pair) / d);
      const value = k % 2 === 0 ? Math.sin(angle) : Math.cos(angle);
      const column = layout === "split" ? (k % 2 === 0 ? pair : half + pair) : k;
      out[(p - start) * d + column] = value;
    }
  }
  return out;
}

/** RoPE's cos and sin in Hugging Face's half layout, `[maxLen * headDim]` each. */
export function rotary(maxLen, headDim, base = 10000) {
  const cos = new Float64Array(maxLen * headDim);
  const sin = new Float64Array(maxLen * headDim);
  const half = headDim / 2;
  for (let p = 0; p < maxLen; p++) {
    for (let k = 0; k < headDim; k++) {
      const angle = p * base ** ((-2 * (k % half)) / headDim);
      cos[p * headDim + k] = Math.cos(angle);
      sin[p * headDim + k] = Math.sin(angle);
    }
  }
  return { cos, sin };
}

/** Press et al.'s slopes of n heads. */
export function slopes(n) {
  const c = 2 ** Math.floor(Math.log2(n));
  const out = [];
  for (let k = 1; k <= c; k++) out.push(2 ** ((-8 * k) / c));
  for (let k = 1; out.length < n; k += 2) out.push(2 ** ((-8 * k) / (2 * c)));
  return out;
}

/** The largest absolute difference of two arrays of the same length. */
export function maxDifference(a, b) {
  if (a.length !== b.length) throw new RangeError(`lengths ${a.length} and ${b.length}`);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}
