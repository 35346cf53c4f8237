// The routing policies the page decoder runs. Python twin: s2d2/policies/__init__.py (REGISTRY, make_policy).
//
// Not here: `cost_aware`, which routes with this machine's measured forward seconds, so a page's decisions could not
// equal the server's.
import { Always, Never } from "./always_never.js";
import { ContextualBanditUCB } from "./contextual_bandit_ucb.js";
import { MaskSpanLength } from "./mask_span_length.js";
import { ScoreHysteresis } from "./score_hysteresis.js";
import { ScoreThreshold } from "./score_threshold.js";

export const REGISTRY = Object.freeze({
  mask_span_length: MaskSpanLength,
  score_threshold: ScoreThreshold,
  score_hysteresis: ScoreHysteresis,
  always: Always,
  never: Never,
  contextual_bandit_ucb: ContextualBanditUCB,
});

/** A fresh policy object (fresh state) for cfg.policy; a RangeError names a policy the page cannot run. */
export function makePolicy(cfg) {
  const cls = REGISTRY[cfg.policy];
  if (!cls) throw new RangeError(`policy: ${JSON.stringify(cfg.policy)} is decoded on the server only; the page runs ${Object.keys(REGISTRY).join(", ")}`);
  return new cls(cfg);
}
