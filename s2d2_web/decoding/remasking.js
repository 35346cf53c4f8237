// Baseline unmasking rules over the still-masked positions of the window. Python twin: s2d2/decoding/remasking.py
// (rule_inputs, then choose), computed here on the host in one place.

export const RULES = ["low_confidence_static", "low_confidence_dynamic", "sequential", "entropy_bounded"];

/** `order` with the non-candidates moved to the end (stable). */
function candidatesFirst(order, candidates) {
  if (candidates === null) return order;
  return [...order.filter((i) => candidates[i]), ...order.filter((i) => !candidates[i])];
}

/** The rule's inputs over the masks: {order?, above?, eb_below?}. p: draft probabilities; ent(): entropies (read by
 * entropy_bounded only); candidates: bool per mask or null (all); above: the count above τ when known. */
export function ruleInputs(rule, p, ent, tau, gamma, candidates = null, above = null) {
  if (!RULES.includes(rule)) throw new RangeError(`remasking: unknown rule ${JSON.stringify(rule)}`);
  const n = p.length;
  const ar = Array.from({ length: n }, (_, i) => i);
  const out = {};
  if (rule === "sequential") {
    if (candidates !== null) out.order = candidatesFirst(ar, candidates);
  } else if (rule === "entropy_bounded") {
    const e = typeof ent === "function" ? ent() : ent;
    const order = candidatesFirst([...ar].sort((a, b) => e[a] - e[b]), candidates);
    const limit = candidates === null ? n : candidates.filter(Boolean).length;
    let sum = 0;
    let below = 0;
    order.forEach((i, r) => {
      sum += e[i];
      if (sum < gamma && r < limit) below++;
    });
    out.order = order;
    out.eb_below = below;
  } else {
    out.order = candidatesFirst([...ar].sort((a, b) => p[b] - p[a]), candidates);
    if (rule === "low_confidence_dynamic") {
      out.above = above !== null ? above : p.filter((x, i) => x > tau && (candidates === null || candidates[i])).length;
    }
  }
  return out;
}

/** The rule's picks (mask indices, in selection order) and how they were chosen. */
export function choose(rule, k, candidates, got, topup = false) {
  k = Math.min(k, candidates.length);
  if (candidates.length === 0 || k <= 0) return [[], "fallback"];
  const order = got.order ?? candidates;
  if (rule === "low_confidence_dynamic" && got.above >= k) return [order.slice(0, got.above), "threshold"];
  if (rule === "entropy_bounded") {
    const n = Math.max(1, got.eb_below);
    return [order.slice(0, topup ? Math.min(n, k) : n), "fallback"];
  }
  return [order.slice(0, k), "fallback"];
}
