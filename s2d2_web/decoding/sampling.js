// logits -> distribution -> tokens, one transform for draft, verifier and residual.
// Python twin: s2d2/decoding/sampling.py (and the warpers of s2d2/models/warpers.py: temperature, top-k, top-p, in
// transformers' order).
//
// Everything after the logits is float64, as the Python computes it (token_distribution widens the float32 logits to
// float64): both sides then agree to ~1e-15, where float32 softmaxes differ by ~1e-6 between CPU kernel sets, enough
// to swap two drafts' confidence ranking (docs/page-decoder.md, 'What is identical').

export function doSample(cfg) {
  return cfg.temperature >= 1e-6;
}

/** Temperature, then top-k, then top-p, on one float64 row of logits (in place), as transformers' warpers. */
function warp(row, cfg) {
  const V = row.length;
  if (cfg.temperature !== 1.0) for (let i = 0; i < V; i++) row[i] /= cfg.temperature;
  if (cfg.top_k > 0) {
    const k = Math.min(cfg.top_k, V);
    const kth = Float64Array.from(row).sort().reverse()[k - 1]; // ties at the k-th value survive
    for (let i = 0; i < V; i++) if (row[i] < kth) row[i] = -Infinity;
  }
  if (cfg.top_p < 1.0) {
    const order = Array.from(row.keys()).sort((a, b) => row[a] - row[b]); // ascending, stable
    const probs = softmaxRow(Float64Array.from(order, (i) => row[i]));
    let cum = 0;
    for (let r = 0; r < V - 1; r++) { // the top token always survives
      cum += probs[r];
      if (cum <= 1 - cfg.top_p) row[order[r]] = -Infinity;
    }
  }
}

/** softmax of one row in float64: exp(x - max) / Σ exp(x - max). */
function softmaxRow(row) {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i] > max) max = row[i];
  const out = new Float64Array(row.length);
  let sum = 0;
  for (let i = 0; i < row.length; i++) {
    out[i] = Math.exp(row[i] - max);
    sum += out[i];
  }
  for (let i = 0; i < row.length; i++) out[i] = out[i] / sum;
  return out;
}

/** Probability rows (Float64Array [V] each, from float32 logits) after the mask logit is set to -inf and the
 * sampling transform. */
export function tokenDistribution(rows, cfg, maskId) {
  return rows.map((logits) => {
    const row = Float64Array.from(logits);
    row[maskId] = -Infinity; // the mask token is never a draft, a verifier pick or a residual draw
    if (doSample(cfg)) warp(row, cfg);
    return softmaxRow(row);
  });
}

/** The first index of the largest value, and that value. */
export function argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return [best, row[best]];
}

/** Argmax when greedy, else one sample per row from the decode's stream (`kind`: the draw site). */
export function drawTokens(rows, cfg, stream, kind = "draft") {
  if (!doSample(cfg)) return rows.map((r) => argmax(r)[0]);
  if (stream === null) throw new RangeError("rng: the page decoder samples only with rng='counter'");
  return stream.categorical(rows, kind);
}

/** drawTokens and each drawn token's probability. */
export function drawWithProbs(rows, cfg, stream) {
  const tokens = drawTokens(rows, cfg, stream);
  return [tokens, tokens.map((t, i) => rows[i][t])];
}

/** Shannon entropy in nats per row, 0 log 0 = 0. */
export function entropy(rows) {
  return rows.map((p) => {
    let h = 0;
    for (let i = 0; i < p.length; i++) h -= p[i] * Math.log(Math.max(p[i], 1e-30));
    return h;
  });
}

/** The `k` most likely tokens of a row, as [{token, prob}] (largest first; ties: lower id first). */
export function topK(row, k = 5) {
  const n = Math.min(k, row.length);
  const best = [];
  for (let i = 0; i < row.length; i++) {
    const v = row[i];
    if (best.length < n || v > best[best.length - 1][1]) {
      let at = best.length;
      while (at > 0 && v > best[at - 1][1]) at--;
      best.splice(at, 0, [i, v]);
      if (best.length > n) best.pop();
    }
  }
  return best.map(([token, prob]) => ({ token, prob }));
}
