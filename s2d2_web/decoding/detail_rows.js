// The detailed trace rows of a step (per-mask drafts, per-position verification).
// Python twin: s2d2/decoding/detail_rows.py.
import { normalizedEntropy, top2Margin } from "../estimators.js";
import { topK } from "./sampling.js";

function candidates(model, row) {
  return topK(row).map(({ token, prob }) => ({ token, text: model.text(token), prob }));
}

/** Per mask: p, normalized entropy, top-1 minus top-2 margin and the top-5 of the draft distribution. */
export function draftRows(ctx, probs, tokens, p, masks, start, entropies = null) {
  if (!ctx.rec.detailed) return [];
  const h = entropies ?? normalizedEntropy(probs);
  const margin = top2Margin(probs);
  return masks.map((m, i) => ({ position: start + m, token: tokens[i], text: ctx.model.text(tokens[i]), p: p[i],
    entropy: h[i], margin: margin[i], top: candidates(ctx.model, probs[i]) }));
}

/** Per span position: p, q(draft), r, the draw, the test, argmax q and the top-5 of q. */
export function verifyRows(ctx, acc, pSpan, qRows, masks, start, drafts) {
  if (!ctx.rec.detailed) return [];
  const m = ctx.model;
  return acc.accepted.map((ok, i) => ({
    position: start + masks[i], draft: drafts[i], draft_text: m.text(drafts[i]), p: pSpan[i], q: acc.qDraft[i],
    ratio: acc.ratio[i], u: acc.draws === null ? null : acc.draws[i], accepted: ok, argmax_q: acc.argmaxQ[i],
    argmax_q_text: m.text(acc.argmaxQ[i]), argmax_q_prob: acc.argmaxQProb[i], top_q: candidates(m, qRows[i]),
  }));
}
