// `score_hysteresis`: an ON/OFF switch on the score, state kept across steps and blocks.
// Python twin: s2d2/policies/score_hysteresis.py.
import { Policy, arrow, fmt } from "./base.js";
import { score, scoreDetails, scoreExpression } from "./score.js";

const state = (on) => (on ? "ON" : "OFF");

export class ScoreHysteresis extends Policy {
  static policyName = "score_hysteresis";

  reset() {
    this.isOn = false;
  }

  decide(inputs) {
    const st = this.cfg;
    const on = st.hysteresis_on;
    const off = st.hysteresis_off;
    const strict = st.hysteresis_strict;
    const s = score(st, inputs.k_hat, inputs.n_hi, inputs.span_len);
    const before = this.isOn;
    let test;
    if (!before) {
      this.isOn = strict ? s > on : s >= on;
      const ops = strict ? [">", "≤"] : ["≥", "<"];
      test = `${this.isOn ? ops[0] : ops[1]} τ_on ${fmt(on)}`;
    } else {
      this.isOn = !(s < off);
      test = `${this.isOn ? "≥" : "<"} τ_off ${fmt(off)}`;
    }
    const expr = scoreExpression(st, inputs.k_hat, inputs.n_hi, inputs.span_len);
    const reason = `${state(before)}: ${expr} ${test} ${arrow(this.isOn)} (${state(this.isOn)})`;
    const details = {
      ...scoreDetails(st, inputs),
      state_before: state(before),
      state_after: state(this.isOn),
      band: [off, on],
      hysteresis_on: on,
      hysteresis_off: off,
      strict,
      on_comparison: strict ? ">" : ">=",
    };
    return this.decision(this.isOn, s, reason, details);
  }
}
