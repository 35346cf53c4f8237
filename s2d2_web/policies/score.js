// The verification score s = K̂ − c or K̂ − c·N_hi. Python twin: s2d2/policies/score.py.
import { fmt, num } from "./base.js";

export function score(cfg, kHat, nHi, spanLen) {
  if (spanLen <= 0) return -Infinity;
  const c = cfg.penalty_coef;
  return cfg.score_type === "difference_static" ? kHat - c : kHat - c * nHi;
}

export function scoreExpression(cfg, kHat, nHi, spanLen) {
  const s = score(cfg, kHat, nHi, spanLen);
  if (spanLen <= 0) return "s = -∞ (empty span)";
  const c = num(cfg.penalty_coef);
  if (cfg.score_type === "difference_static") return `s = K̂ − c = ${fmt(kHat)} − ${c} = ${fmt(s)}`;
  return `s = K̂ − c·N_hi = ${fmt(kHat)} − ${c}·${nHi} = ${fmt(s)}`;
}

export function scoreDetails(cfg, inputs) {
  return {
    span_len: inputs.span_len,
    k_hat: inputs.k_hat,
    n_hi: inputs.n_hi,
    score_type: cfg.score_type,
    penalty_coef: cfg.penalty_coef,
    score: score(cfg, inputs.k_hat, inputs.n_hi, inputs.span_len),
  };
}
