// One denoising step of the current window: draft -> first mask span -> route -> verify -> fallback.
// Python twin: s2d2/decoding/step.py (run_step, draft_forward, policy_summary, inputs_from_summary, _commits).
import { acceptanceAlphas, expectedAcceptedTokens, normalizedEntropy } from "../estimators.js";
import { draftPattern } from "../models/masks.js";
import { draftRows } from "./detail_rows.js";
import { range } from "./forwards.js";
import { keptPrefixRows } from "./kv.js";
import { drawWithProbs, entropy, tokenDistribution } from "./sampling.js";
import { fallbackK, skipPicks } from "./selection.js";
import { verifyStep } from "./verify_branch.js";

/** Length of the first maximal run of consecutive masked positions. */
export function firstMaskSpan(masks) {
  for (let i = 1; i < masks.length; i++) if (masks[i] !== masks[i - 1] + 1) return i;
  return masks.length;
}

/** The draft forward's logits at block positions `at` (block-relative); only the uncached positions [cached, B)
 * are queried, the decoded prefix before `firstMask` causal with draft_ver (and kept in the cache with kv_reuse). */
export async function draftForward(ctx, block, step, start, at, firstMask) {
  const k = ctx.cached;
  const prefix = Math.max(0, firstMask - k);
  const n = ctx.B - k;
  const attention = ctx.cfg.draft_ver ? draftPattern(n, prefix) : "full";
  const keep = keptPrefixRows(ctx, prefix);
  const rows = await ctx.rec.forward("draft", block, step, ctx.cache, ctx.x.slice(start + k, start + ctx.B),
    range(start + k, start + ctx.B), attention, keep, { rows: at.map((m) => m - k) });
  ctx.cached += keep;
  return rows;
}

/** α over the span, K̂, N_hi and the mean normalized entropy: what a policy reads. */
export function policyInputs(ctx, probs, p, h, spanLen, n, windowLen, notProgress) {
  const { cfg } = ctx;
  const hSpan = cfg.ucb_entropy_scope === "span" ? h.slice(0, spanLen) : null;
  const alphas = acceptanceAlphas(cfg, probs.slice(0, spanLen), p.slice(0, spanLen), hSpan);
  const scope = hSpan ?? h;
  return { // α and K̂ are computed in float64 and recorded as float32, as step.py's policy_summary records them
    span_len: spanLen, alphas: alphas.map(Math.fround), k_hat: Math.fround(expectedAcceptedTokens(alphas)),
    n_hi: p.filter((x) => x > cfg.confidence_threshold).length, window_len: windowLen,
    progress: (windowLen - n - notProgress) / windowLen,
    mean_entropy: scope.reduce((a, b) => a + b, 0) / scope.length,
  };
}

/** One step over window [ws, we) of the block at `start`; k_s tokens at least. Returns its StepRecord. */
export async function runStep(ctx, block, start, [ws, we], step, kS) {
  const { cfg } = ctx;
  const masks = ctx.masks.filter((m) => ws - start <= m && m < we - start);
  const n = masks.length;
  const spanLen = firstMaskSpan(masks);
  const minK = Math.min(kS, n);
  const firstForward = ctx.rec.lastIndex + (ctx.carried !== null ? 0 : 1);

  let logits;
  if (ctx.carried !== null) {
    const { rows, offset } = ctx.carried;
    ctx.carried = null;
    logits = masks.map((m) => rows[m - offset]);
  } else {
    logits = await draftForward(ctx, block, step, start, masks, masks[0]);
  }
  const probs = tokenDistribution(logits, cfg, ctx.maskId);
  const [tokens, p] = drawWithProbs(probs, cfg, ctx.stream);
  let ent = null;
  const draft = { probs, tokens, p, entropy: () => (ent ??= entropy(probs)) };
  const h = normalizedEntropy(probs);

  let inputs = null;
  let decision = null;
  if (ctx.policy !== null) {
    const notProgress = Math.max(0, Math.min(we, ctx.promptLen) - ws);
    inputs = policyInputs(ctx, probs, p, h, spanLen, n, we - ws, notProgress);
    decision = ctx.policy.decide(inputs);
  }
  let picks;
  let written = tokens;
  let verification = null;
  if (decision !== null && decision.verify) {
    ({ picks, tokens: written, verification } = await verifyStep(ctx, block, step, start, draft, masks, spanLen, minK));
  } else {
    picks = skipPicks(cfg, p, draft.entropy, inputs === null ? null : inputs.n_hi, minK);
  }
  const reward = ctx.policy !== null ? ctx.policy.update(decision, picks.length) : null;
  const commits = commitPicks(ctx, start, masks, picks, written);
  return {
    index: -1, block, step, window: [ws, we], forwards: range(firstForward, ctx.rec.lastIndex + 1),
    masks_before: masks.map((m) => start + m), drafts: draftRows(ctx, probs, tokens, p, masks, start, h),
    span: [start + masks[0], spanLen], policy_inputs: inputs, decision, verification,
    fallback_k: fallbackK(picks, minK), commits, reward,
  };
}

/** Write the picks into the sequence, in commit order; update the block's masks and the stop hits. */
function commitPicks(ctx, start, masks, picks, written) {
  const commits = picks.map(([i, how]) => {
    const position = start + masks[i];
    ctx.x[position] = written[i];
    return { position, token: written[i], text: ctx.rec.detailed ? ctx.model.text(written[i]) : "", how };
  });
  const done = new Set(picks.map(([i]) => masks[i]));
  ctx.masks = ctx.masks.filter((m) => !done.has(m));
  for (const c of commits) if (ctx.stopSet.has(c.token)) ctx.stopHits.push(c.position);
  return commits;
}
