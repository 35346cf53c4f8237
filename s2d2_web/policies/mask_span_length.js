// `mask_span_length`: verify iff the first mask span has at least τ_span positions.
// Python twin: s2d2/policies/mask_span_length.py.
import { Policy, arrow } from "./base.js";

export class MaskSpanLength extends Policy {
  static policyName = "mask_span_length";

  decide(inputs) {
    const tau = this.cfg.min_span_length;
    const verify = inputs.span_len >= tau;
    const reason = `span |C| = ${inputs.span_len} ${verify ? "≥" : "<"} τ_span ${tau} ${arrow(verify)}`;
    return this.decision(verify, null, reason, { span_len: inputs.span_len, min_span_length: tau });
  }

  alwaysVerifies() {
    return this.cfg.min_span_length <= 1;
  }
}
