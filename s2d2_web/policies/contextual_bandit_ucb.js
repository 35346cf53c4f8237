// `contextual_bandit_ucb`: UCB1 per context bucket (span, progress, entropy bins) over skip / verify.
// Python twin: s2d2/policies/contextual_bandit_ucb.py (ContextualBanditUCB, ucb_bin).
//
// The reward is tokens per forward (base.js update: decoded / 2 for a verify step, decoded / 1 for a skip); ties
// verify, so the first visit to a bucket verifies and the next one skips. State lives for one decode (a fresh
// policy per decode, policies/index.js), as the Python policy's reset() per call.
import { Policy, arrow, fmt } from "./base.js";

const SKIP = "skip";
const VERIFY = "verify";

/** bin(v; lo, hi, n) = min(n−1, max(0, ⌊(clip(v,lo,hi)−lo)/(hi−lo)·n⌋)); 0 if n ≤ 1, hi ≤ lo or v is NaN. */
export function ucbBin(v, lo, hi, n) {
  if (n <= 1 || hi <= lo || Number.isNaN(v)) return 0;
  const x = Math.min(Math.max(v, lo), hi);
  return Math.min(n - 1, Math.max(0, Math.floor(((x - lo) / (hi - lo)) * n)));
}

export class ContextualBanditUCB extends Policy {
  static policyName = "contextual_bandit_ucb";

  reset() {
    const st = this.cfg;
    this.nBuckets = st.ucb_span_bins * st.ucb_progress_bins * st.ucb_entropy_bins;
    this.t = 0;
    this.counts = { [SKIP]: new Array(this.nBuckets).fill(0), [VERIFY]: new Array(this.nBuckets).fill(0) };
    this.sums = { [SKIP]: new Array(this.nBuckets).fill(0), [VERIFY]: new Array(this.nBuckets).fill(0) };
  }

  bins(inputs) {
    const st = this.cfg;
    return [ucbBin(Math.max(1, inputs.span_len), 1, inputs.window_len, st.ucb_span_bins),
      ucbBin(inputs.progress, 0.0, 1.0, st.ucb_progress_bins),
      ucbBin(inputs.mean_entropy, 0.0, 1.0, st.ucb_entropy_bins)];
  }

  bucket([span, prog, ent]) {
    return (span * this.cfg.ucb_progress_bins + prog) * this.cfg.ucb_entropy_bins + ent;
  }

  /** R/n + β·sqrt(ln t / n); +∞ when unvisited; no bonus while ln t ≤ 0. */
  value(action, b) {
    const n = this.counts[action][b];
    if (n === 0) return Infinity;
    const logT = this.t > 0 ? Math.log(this.t) : 0.0;
    const bonus = logT > 0 ? this.cfg.ucb_beta * Math.sqrt(logT / n) : 0.0;
    return this.sums[action][b] / n + bonus;
  }

  decide(inputs) {
    this.t += 1; // the clock ticks at every decision, learned from or not
    const bins = this.bins(inputs);
    const b = this.bucket(bins);
    const uSkip = this.value(SKIP, b);
    const uVerify = this.value(VERIFY, b);
    const verify = uVerify >= uSkip; // ties (both unvisited included) verify
    const counts = { [SKIP]: this.counts[SKIP][b], [VERIFY]: this.counts[VERIFY][b] };
    const mean = (a) => (counts[a] ? this.sums[a][b] / counts[a] : 0.0);
    const st = this.cfg;
    const reason = `t=${this.t} bucket ${b} (${bins.join(", ")}): UCB verify ${fmt(uVerify)} (n=${counts[VERIFY]}) `
      + `${verify ? "≥" : "<"} UCB skip ${fmt(uSkip)} (n=${counts[SKIP]}) ${arrow(verify)}`;
    const details = {
      t: this.t, bins, n_bins: [st.ucb_span_bins, st.ucb_progress_bins, st.ucb_entropy_bins], bucket: b, counts,
      means: { [SKIP]: mean(SKIP), [VERIFY]: mean(VERIFY) }, ucb: { [SKIP]: uSkip, [VERIFY]: uVerify },
      ucb_beta: st.ucb_beta, span_len: inputs.span_len, window_len: inputs.window_len, progress: inputs.progress,
      mean_entropy: inputs.mean_entropy, k_hat: inputs.k_hat, n_hi: inputs.n_hi,
    };
    return this.decision(verify, null, reason, details);
  }

  learn(decision, reward) {
    const action = decision.verify ? VERIFY : SKIP;
    this.counts[action][decision.details.bucket] += 1;
    this.sums[action][decision.details.bucket] += reward;
  }
}
