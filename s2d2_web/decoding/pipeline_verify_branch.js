// S2D2's verify branch on the D2F pipeline: the verifier forward over the span, the acceptance test, the residual
// draw, the writes and the record. Python twin: s2d2/decoding/pipeline_verify_branch.py (position-aligned models:
// the 2L verifier).
//
// The span is the first run of masks after the cache (it may cross into later blocks). The verifier is the model in
// AR mode on the cache this step's forward left, in the 2L layout over [cache end, span end): drafts, then MASK
// copies at the same positions, row L+i seeing the cache, the drafts before i and itself. No KV is stored. Then
// D2F's two gates: `draft_confidence_threshold` also requires the draft's p above it, and at a rejection
// `verify_confidence_threshold` draws the residual only when q(rejected draft) reaches it; otherwise (as with
// allow_resample false) the rejected position stays masked and the D2F rule decides it.
import { verify2lPattern } from "../models/masks.js";
import { acceptance, residualToken } from "./acceptance.js";
import { verifyRows } from "./detail_rows.js";
import { range } from "./forwards.js";
import { tokenDistribution } from "./sampling.js";

/** q over the span: the 2L verifier forward on [hi, span end) with the span filled by its drafts. */
async function verifierProbs(ctx, st, first, hi, spanStart, s, drafts) {
  const end = spanStart + s;
  const L = end - hi;
  const at = spanStart - hi;
  const filled = Array.from(ctx.x.slice(hi, end));
  for (let i = 0; i < s; i++) filled[at + i] = drafts[i];
  const ids = [...filled, ...new Array(L).fill(ctx.maskId)];
  const positions = [...range(hi, end), ...range(hi, end)];
  const logits = await ctx.rec.forward("verify_2l", first.index, st.step - first.addedStep, ctx.cache, ids, positions,
    verify2lPattern(L), 0, { rows: range(L + at, 2 * L) });
  return tokenDistribution(logits, ctx.cfg, ctx.maskId);
}

/** Whether the rejected span position k draws its residual (the verify_confidence_threshold gate). */
function resamples(cfg, qDraft, k) {
  if (!cfg.allow_resample) return false;
  const threshold = cfg.verify_confidence_threshold ?? null;
  return threshold === null || qDraft[k] >= threshold;
}

/** Verify the first span (absolute `masks`, the first `spanLen` consecutive) against the step's drafts:
 * {record (the trace's Verification), commits (the accepted prefix, then the resampled position)}. Writes them into
 * ctx.x and sets st.eos when the resampled token is a stop id. */
export async function verifySpan(ctx, st, first, hi, masks, spanLen, probs, drafts, p) {
  const { cfg } = ctx;
  const s = spanLen;
  const qRows = await verifierProbs(ctx, st, first, hi, masks[0], s, drafts);
  const acc = acceptance(cfg.acceptance, drafts.slice(0, s), p.slice(0, s), qRows, cfg.ratio_gamma, ctx.stream);
  const gate = cfg.draft_confidence_threshold ?? null;
  if (gate !== null) acc.accepted = acc.accepted.map((ok, i) => ok && p[i] > gate);
  let k = acc.accepted.indexOf(false);
  if (k < 0) k = s;
  const start = masks[0];
  const text = (t) => (ctx.rec.detailed ? ctx.model.text(t) : "");
  const commits = [];
  for (let i = 0; i < k; i++) {
    ctx.x[start + i] = drafts[i];
    commits.push({ position: start + i, token: drafts[i], text: text(drafts[i]), how: "accepted" });
  }
  const record = { kind: "2l", mode: cfg.acceptance, positions: verifyRows(ctx, acc, p, qRows, masks, 0, drafts),
    accepted_len: k, first_reject: k < s ? k : null, residual_mass: null, fallback_to_q: false, resampled: null,
    resampled_text: "" };
  if (k < s && resamples(cfg, acc.qDraft, k)) {
    let token;
    if (cfg.acceptance === "greedy_exact") {
      token = acc.argmaxQ[k];
    } else {
      const r = residualToken(probs[k], qRows[k], ctx.stream);
      [token, record.residual_mass, record.fallback_to_q] = [r.token, r.mass, r.fallbackToQ];
    }
    record.resampled = token;
    record.resampled_text = text(token);
    ctx.x[start + k] = token;
    commits.push({ position: start + k, token, text: text(token), how: "resampled" });
    if (ctx.stopSet.has(token)) st.eos = true;
  }
  return { record, commits };
}
