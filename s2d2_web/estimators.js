// Token-acceptance estimators and K̂. Python twin: s2d2/estimators.py.
//
// Rows are float64 distributions (decoding/sampling.js) and every value is float64, as in the Python (its
// distributions are float64 too): the two sides agree to ~1e-15, so a threshold decision agrees unless its two
// numbers do to that many digits.

/** H(π)/ln V per row, 0·log 0 = 0, clamped to [0, 1]. */
export function normalizedEntropy(rows) {
  return rows.map((p) => {
    const v = p.length;
    if (v <= 1) return 0;
    let h = 0;
    for (let i = 0; i < v; i++) if (p[i] > 0) h -= p[i] * Math.log(p[i]);
    return Math.min(1, Math.max(0, h / Math.log(v)));
  });
}

/** Top-1 minus top-2 probability per row. */
export function top2Margin(rows) {
  return rows.map((p) => {
    if (p.length === 1) return p[0];
    let a = -Infinity;
    let b = -Infinity;
    for (let i = 0; i < p.length; i++) {
      if (p[i] > a) { b = a; a = p[i]; } else if (p[i] > b) b = p[i];
    }
    return a - b;
  });
}

const ESTIMATORS = {
  hard_margin_threshold: (cfg, rows) => top2Margin(rows).map((m) => (m > cfg.margin_threshold ? 1 : 0)),
  hard_entropy_threshold: (cfg, rows, p, h) => (h ?? normalizedEntropy(rows)).map((e) => (e < cfg.entropy_threshold ? 1 : 0)),
  soft_confidence_power: (cfg, rows, p) => p.map((x) => Math.min(1, Math.max(0, x)) ** cfg.confidence_power),
  soft_clipped_linear_margin: (cfg, rows) => top2Margin(rows).map((m) => Math.min(1, Math.max(0, cfg.margin_scale * m))),
  soft_entropy_negexp: (cfg, rows, p, h) => (h ?? normalizedEntropy(rows)).map((e) => Math.exp(-cfg.negexp_beta * e)),
  soft_renyi_2_entropy: (cfg, rows) => rows.map((r) => {
    let s = 0;
    for (let i = 0; i < r.length; i++) s += r[i] * r[i];
    return Math.min(1, Math.max(0, s));
  }),
};

/** α_i per span position for cfg.estimator; `entropy`: the rows' normalized entropies when already known. */
export function acceptanceAlphas(cfg, rows, pDraft, entropy = null) {
  const est = ESTIMATORS[cfg.estimator];
  if (!est) throw new RangeError(`estimator: unknown value ${JSON.stringify(cfg.estimator)}`);
  return est(cfg, rows, pDraft, entropy);
}

/** K̂ = Σ_k Π_{i≤k} clip(α_i, 0, 1), in float64; 0 for an empty span. */
export function expectedAcceptedTokens(alphas) {
  let prod = 1;
  let sum = 0;
  for (const a of alphas) {
    prod *= Math.min(1, Math.max(0, a));
    sum += prod;
  }
  return sum;
}
