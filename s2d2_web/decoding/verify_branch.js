// The verify branch of a step: the 2L verifier forward, the acceptance test, what the step decodes.
// Python twin: s2d2/decoding/verify_branch.py (position-aligned models: the 2L verifier, trimmed or not).
import { verify2lPattern, verify2lSpanPattern } from "../models/masks.js";
import { acceptance, residualToken } from "./acceptance.js";
import { verifyRows } from "./detail_rows.js";
import { range } from "./forwards.js";
import { rememberVerified, settleVerifiedRows } from "./kv.js";
import { tokenDistribution } from "./sampling.js";
import { verifyPicks } from "./selection.js";

/** The verifier's distributions over the span. `blockIds`: the block's tokens as the verifier reads them (the
 * editing loop passes its step's edits applied); `masks`: the step's masks (block-relative). */
export async function verifyProbs(ctx, block, step, start, blockIds, drafts, masks, spanLen) {
  const { cfg, maskId } = ctx;
  const k = ctx.cached;
  const s = spanLen;
  let ids;
  let pos;
  let pattern;
  let keep;
  let end;
  if (cfg.trim_verify) { // [x~[k:e] | MASK × s]; second-half row t is the AR query at span position m0 + t
    const m0 = masks[0];
    end = masks[s - 1] + 1;
    const n = end - k;
    ids = [...blockIds.slice(k, end)];
    for (let i = 0; i < s; i++) ids[n - s + i] = drafts[i];
    ids.push(...new Array(s).fill(maskId));
    pos = [...range(start + k, start + end), ...range(start + m0, start + end)];
    pattern = verify2lSpanPattern(n, s);
    keep = cfg.kv_reuse ? n : 0;
  } else { // [x~ | MASK × n] at duplicated positions; row n+i is one AR query at i
    end = ctx.B;
    const n = end - k;
    ids = [...blockIds.slice(k, end)];
    masks.forEach((m, i) => { ids[m - k] = drafts[i]; });
    ids.push(...new Array(n).fill(maskId));
    pos = [...range(start + k, start + end), ...range(start + k, start + end)];
    pattern = verify2lPattern(n);
    keep = cfg.kv_reuse ? n : 0;
  }
  const rows = cfg.trim_verify ? null : masks.slice(0, s).map((m) => m - k);
  const logits = await ctx.rec.forward("verify_2l", block, step, ctx.cache, ids, pos, pattern, keep,
    { last: cfg.trim_verify ? s : end - k, rows });
  rememberVerified(ctx, end);
  return tokenDistribution(logits, cfg, maskId);
}

/** The first block position whose token now differs from what the verifier read. */
function firstChanged(masks, picks, resampledSame, end) {
  const same = new Set(picks.filter(([, how]) => how !== "resampled" || resampledSame).map(([i]) => i));
  let i = 0;
  while (same.has(i)) i++;
  return i < masks.length ? masks[i] : end;
}

/** Verifier forward + acceptance test over the span, extras and the top-up: {picks, tokens, verification}. */
export async function verifyStep(ctx, block, step, start, draft, masks, spanLen, minK) {
  const { cfg } = ctx;
  const s = spanLen;
  const qRows = await verifyProbs(ctx, block, step, start, ctx.x.slice(start, start + ctx.B), draft.tokens,
    masks, s);
  const spanTokens = draft.tokens.slice(0, s);
  const acc = acceptance(cfg.acceptance, spanTokens, draft.p.slice(0, s), qRows, cfg.ratio_gamma, ctx.stream);
  const [picks, first] = verifyPicks(cfg, acc.accepted, acc.ratio, draft.p, draft.entropy, minK);
  const tokens = [...draft.tokens];
  let resampled = null;
  let mass = null;
  let toQ = false;
  let same = false;
  if (first < s && cfg.allow_resample) {
    if (cfg.acceptance === "greedy_exact") {
      resampled = acc.argmaxQ[first];
    } else {
      const r = residualToken(draft.probs[first], qRows[first], ctx.stream);
      [resampled, mass, toQ] = [r.token, r.mass, r.fallbackToQ];
      same = resampled === draft.tokens[first];
    }
    tokens[first] = resampled;
  }
  if (ctx.seenEnd !== null) settleVerifiedRows(ctx, firstChanged(masks, picks, same, ctx.seenEnd));
  const verification = {
    kind: "2l", mode: cfg.acceptance, positions: verifyRows(ctx, acc, draft.p, qRows, masks, start, draft.tokens),
    accepted_len: first, first_reject: first < s ? first : null, residual_mass: mass, fallback_to_q: toQ, resampled,
    resampled_text: resampled !== null && ctx.rec.detailed ? ctx.model.text(resampled) : "",
  };
  return { picks, tokens, verification };
}

/** The verifier + acceptance test over the span, for loops that pick after it (the editing loop, which passes its
 * block with this step's edits applied): {verification, chosen: [[maskIndex, token, how]]} (accepted, resampled). */
export async function verifySpan(ctx, block, step, start, blockIds, masks, probs, drafts, p, spanLen) {
  const { cfg } = ctx;
  const s = spanLen;
  const qRows = await verifyProbs(ctx, block, step, start, blockIds, drafts, masks, s);
  const acc = acceptance(cfg.acceptance, drafts.slice(0, s), p.slice(0, s), qRows, cfg.ratio_gamma, ctx.stream);
  let first = acc.accepted.indexOf(false);
  if (first < 0) first = s;
  let resampled = null;
  let mass = null;
  let toQ = false;
  if (first < s && cfg.allow_resample) {
    if (cfg.acceptance === "greedy_exact") {
      resampled = acc.argmaxQ[first];
    } else {
      const r = residualToken(probs[first], qRows[first], ctx.stream);
      [resampled, mass, toQ] = [r.token, r.mass, r.fallbackToQ];
    }
  }
  const chosen = drafts.slice(0, first).map((t, i) => [i, t, "accepted"]);
  if (resampled !== null) chosen.push([first, resampled, "resampled"]);
  const verification = {
    kind: "2l", mode: cfg.acceptance, positions: verifyRows(ctx, acc, p, qRows, masks, start, drafts),
    accepted_len: first, first_reject: first < s ? first : null, residual_mass: mass, fallback_to_q: toQ, resampled,
    resampled_text: resampled !== null && ctx.rec.detailed ? ctx.model.text(resampled) : "",
  };
  return { verification, chosen };
}
