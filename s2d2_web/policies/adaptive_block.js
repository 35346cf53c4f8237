// Adaptive block size (beyond the paper): the next block's length from the finished block's verifications.
// Python twin: s2d2/policies/adaptive_block.py (AdaptiveBlock.decide).
import { fmt, num } from "./base.js";

/** @param {{length: number, accepted: number[], spans: number[]}} fb @returns {{length: number, reason: string}} */
export function decideBlock(cfg, fb, nextStart) {
  const L = fb.length;
  const lo = cfg.adaptive_min_block;
  const hi = cfg.adaptive_max_block;
  let want;
  let why;
  if (fb.accepted.length === 0) {
    [want, why] = [L, "no verification in the block: keep"];
  } else {
    const mean = fb.accepted.reduce((a, b) => a + b, 0) / fb.accepted.length;
    if (mean < cfg.adaptive_shrink_below * L) {
      [want, why] = [Math.floor(L / 2), `mean accepted prefix ${fmt(mean)} < ${num(cfg.adaptive_shrink_below)}·${L}: shrink`];
    } else if (fb.accepted.every((a, i) => a === fb.spans[i])) {
      [want, why] = [L * 2, "every verify accepted its whole span: grow"];
    } else {
      [want, why] = [L, `mean accepted prefix ${fmt(mean)} of ${L}: keep`];
    }
  }
  const allowed = Math.min(hi, Math.max(lo, want));
  let length = allowed;
  while (length > 1 && nextStart % length) length = Math.floor(length / 2); // starts at a multiple of its length
  let note = allowed !== want ? " (clamped to the allowed sizes)" : "";
  if (length < allowed) note += ` (halved to start at a multiple of its length, position ${nextStart})`;
  return { length, reason: `B ${L} → ${length}: ${why}${note}` };
}
