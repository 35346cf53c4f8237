// Acceptance test, first rejection and residual resampling. Python twin: s2d2/decoding/acceptance.py.
//
// Modes: `paper` (u < min(1, (q/p)^γ)), `sampled` (the same test on a sampled draft), `greedy_exact` (draft ==
// argmax q). The uniforms and the residual draw come from the counter stream (draws.js), so they equal the
// server's with rng="counter".
import { argmax } from "./sampling.js";

/** Every span position tested at once: {qDraft, ratio, draws, accepted, argmaxQ, argmaxQProb}. */
export function acceptance(mode, drafts, pDraft, qRows, gamma, stream) {
  const qDraft = drafts.map((t, i) => qRows[i][t]);
  const ratio = qDraft.map((q, i) => {
    let r = q / Math.max(pDraft[i], 1e-12);
    if (gamma !== 1.0) r **= gamma;
    return Math.min(r, 1);
  });
  const am = qRows.map(argmax);
  const argmaxQ = am.map(([t]) => t);
  const argmaxQProb = am.map(([, v]) => v);
  let draws = null;
  let accepted;
  if (mode === "greedy_exact") {
    accepted = drafts.map((t, i) => t === argmaxQ[i]);
  } else {
    if (stream === null) throw new RangeError("rng: the page decoder draws the acceptance test only with rng='counter'");
    draws = Array.from(stream.uniforms(drafts.length));
    accepted = draws.map((u, i) => u < ratio[i]);
  }
  return { qDraft, ratio, draws, accepted, argmaxQ, argmaxQProb };
}

/** A draw from normalize((q − p)+) over the full rows; from q if the mass is 0 or not finite:
 * {token, mass, fallbackToQ}. One categorical call either way, as in Python. */
export function residualToken(p, q, stream) {
  const V = q.length;
  const residual = new Float64Array(V);
  let mass = 0;
  for (let i = 0; i < V; i++) {
    residual[i] = Math.max(0, q[i] - p[i]);
    mass += residual[i];
  }
  const usable = mass > 0 && Number.isFinite(mass);
  let weights = q;
  if (usable) {
    weights = new Float64Array(V);
    for (let i = 0; i < V; i++) weights[i] = residual[i] / mass;
  }
  const [token] = stream.categorical([weights], "residual");
  return { token, mass, fallbackToQ: !usable };
}
