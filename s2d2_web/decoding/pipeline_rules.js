// What one block of the D2F pipeline decodes at a step (pure functions over one block's masks).
// Python twin: s2d2/decoding/pipeline_rules.py (confidence_scores, top1, d2f_rule, reference_rule).
//
// The D2F rule: every mask whose draft probability is above `confidence_threshold`; a *complete* block with none
// above takes its single best mask by `confidence_score` instead. The reference rule (pipeline_fallback
// "reference", S2D2 only): a complete block takes every mask whose *score* is at least the threshold, else its best
// one; an incomplete block takes nothing.
import { top2Margin } from "../estimators.js";

const f32 = Math.fround;
const NEG_ENTROPY_EPS = f32(1e-10); // the reference's epsilon inside the log

/** Per mask: the score a complete block's top-1 pick maximises (probs: Float32Array rows, p: the drafts' p). */
export function confidenceScores(kind, probs, p) {
  if (kind === "probability") return p;
  if (kind === "margin") return top2Margin(probs);
  if (kind === "neg_entropy") {
    return probs.map((row) => {
      let s = 0;
      for (let i = 0; i < row.length; i++) s += row[i] * Math.log(f32(row[i] + NEG_ENTROPY_EPS));
      return f32(s);
    });
  }
  throw new RangeError(`confidence_score: unknown value ${JSON.stringify(kind)}`);
}

/** The best-scoring mask as a boolean row (the first of equal bests). */
export function top1(scores) {
  let best = 0;
  for (let i = 1; i < scores.length; i++) if (scores[i] > scores[best]) best = i;
  return scores.map((_, i) => i === best);
}

/** [chosen (bool per mask), took its top-1] of one block by the D2F rule. */
export function d2fRule(p, scores, threshold, complete) {
  const above = p.map((v) => v > threshold);
  if (!complete || above.some(Boolean)) return [above, false];
  return [top1(scores), true];
}

/** [chosen, took its top-1] of one block by the reference S2D2-on-D2F fallback. */
export function referenceRule(scores, threshold, complete) {
  if (!complete) return [scores.map(() => false), false];
  const high = scores.map((v) => v >= threshold);
  if (high.some(Boolean)) return [high, false];
  return [top1(scores), true];
}
