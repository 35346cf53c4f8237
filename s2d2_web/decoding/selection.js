// What a step decodes, in commit order: verify picks (accepted prefix, resampled first rejection, ratio extras),
// high-confidence extras, then the remasking rule's picks. Python twin: s2d2/decoding/selection.py (its device and
// host halves are one here: the page has no device to read back from).
import { choose, ruleInputs } from "./remasking.js";

/** The trace's `fallback_k`: what the step still needed when the remasking rule ran. */
export function fallbackK(picks, minK) {
  return Math.max(0, minK - picks.filter(([, how]) => how !== "fallback" && how !== "threshold").length);
}

function rule(cfg, picks, got, candidates, k, topup) {
  const [chosen, how] = choose(cfg.remasking, k, candidates, got, topup);
  for (const i of chosen) picks.push([i, how]);
}

/** A non-verify step (a baseline step, plus high-confidence extras when on): picks [[maskIndex, how]]. */
export function skipPicks(cfg, p, ent, nHi, minK) {
  const n = p.length;
  const hi = cfg.always_check_high_conf ? p.map((x) => x > cfg.confidence_threshold) : null;
  const got = ruleInputs(cfg.remasking, p, ent, cfg.confidence_threshold, cfg.eb_gamma,
    hi === null ? null : hi.map((h) => !h), hi === null ? nHi : null);
  const picks = [];
  let candidates = Array.from({ length: n }, (_, i) => i);
  if (hi !== null) {
    for (let i = 0; i < n; i++) if (hi[i]) picks.push([i, "hiconf_extra"]);
    candidates = candidates.filter((i) => !hi[i]);
  }
  rule(cfg, picks, got, candidates, Math.max(0, minK - picks.length), false);
  return picks;
}

/** A verify step's picks from its acceptance test (`accepted`, `ratio` over the span), and its accepted length. */
export function verifyPicks(cfg, accepted, ratio, p, ent, minK) {
  const n = p.length;
  const s = accepted.length;
  let first = accepted.indexOf(false);
  if (first < 0) first = s;
  const picks = [];
  for (let i = 0; i < first; i++) picks.push([i, "accepted"]);
  if (first < s && cfg.allow_resample) picks.push([first, "resampled"]);
  const topup = !(cfg.ratio_threshold === null && !cfg.always_check_high_conf && cfg.allow_resample && minK <= 1);
  if (!topup) return [picks, first];
  const rejected = first < s;
  const taken = Array.from({ length: n }, (_, i) => i < (cfg.allow_resample ? first + (rejected ? 1 : 0) : first));
  if (cfg.ratio_threshold !== null) {
    for (let i = 0; i < n; i++) {
      if (i < s && i > first && rejected && ratio[i] >= cfg.ratio_threshold) { picks.push([i, "ratio_extra"]); taken[i] = true; }
    }
  }
  if (cfg.always_check_high_conf) {
    for (let i = 0; i < n; i++) {
      if (p[i] > cfg.confidence_threshold && !taken[i]) { picks.push([i, "hiconf_extra"]); taken[i] = true; }
    }
  }
  const got = ruleInputs(cfg.remasking, p, ent, cfg.confidence_threshold, cfg.eb_gamma, taken.map((t) => !t));
  const chosen = new Set(picks.map(([i]) => i));
  const candidates = Array.from({ length: n }, (_, i) => i).filter((i) => !chosen.has(i));
  rule(cfg, picks, got, candidates, Math.max(0, minK - picks.length), true);
  return [picks, first];
}

/** The remasking rule over the masks not `taken` this step (a whole baseline step when none are): [[i, how]]. */
export function fallbackPicks(cfg, p, ent, taken, k, topup) {
  const rest = p.map((_, i) => !taken.has(i));
  const got = ruleInputs(cfg.remasking, p, ent, cfg.confidence_threshold, cfg.eb_gamma, rest);
  const candidates = rest.flatMap((r, i) => (r ? [i] : []));
  const [chosen, how] = choose(cfg.remasking, k, candidates, got, topup);
  return chosen.map((i) => [i, how]);
}
