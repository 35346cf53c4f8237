// `score_threshold`: verify iff s reaches τ_score. Python twin: s2d2/policies/score_threshold.py.
import { Policy, arrow, fmt } from "./base.js";
import { score, scoreDetails, scoreExpression } from "./score.js";

export class ScoreThreshold extends Policy {
  static policyName = "score_threshold";

  decide(inputs) {
    const st = this.cfg;
    const tau = st.score_threshold;
    const s = score(st, inputs.k_hat, inputs.n_hi, inputs.span_len);
    const verify = s >= tau;
    const reason = `${scoreExpression(st, inputs.k_hat, inputs.n_hi, inputs.span_len)} ${verify ? "≥" : "<"} τ ${fmt(tau)} ${arrow(verify)}`;
    return this.decision(verify, s, reason, { ...scoreDetails(st, inputs), score_threshold: tau });
  }

  alwaysVerifies() {
    const st = this.cfg;
    return st.score_type === "difference_static" && st.score_threshold <= -st.penalty_coef;
  }
}
