// `always` and `never`: the forcing rules as named policies. Python twins: s2d2/policies/always.py, never.py.
import { Policy } from "./base.js";

export class Always extends Policy {
  static policyName = "always";

  decide(inputs) {
    return this.decision(true, null, "policy always → verify", { span_len: inputs.span_len });
  }

  alwaysVerifies() {
    return true;
  }
}

export class Never extends Policy {
  static policyName = "never";

  decide(inputs) {
    return this.decision(false, null, "policy never → skip", { span_len: inputs.span_len });
  }
}
