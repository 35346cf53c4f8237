// The policy base and the reason-line helpers. Python twin: s2d2/policies/base.py.

/** A number for a reason line: 2 decimals (Python's f"{x:.2f}": the exact binary value rounded, exact ties to
 * even), ∞ symbols for infinities. */
export function fmt(x) {
  if (x === Infinity) return "∞";
  if (x === -Infinity) return "-∞";
  if (Object.is(x, -0)) return "-0.00";
  const eighths = x * 8;
  if (Number.isInteger(eighths) && Math.abs(eighths) % 2 === 1) { // x = odd/8: 100x ends in exactly .5
    const scaled = x * 100;
    const even = 2 * Math.round(scaled / 2);
    return (even / 100).toFixed(2);
  }
  return x.toFixed(2); // rounds the exact value, as Python does; only exact ties differ (handled above)
}

/** A coefficient as written by the user (Python's f"{x:g}"). */
export function num(x) {
  if (Object.is(x, -0)) return "-0";
  if (Number.isInteger(x) && Math.abs(x) < 1e6) return String(x);
  const t = Number(x.toPrecision(6));
  return Math.abs(t) >= 1e-4 && Math.abs(t) < 1e6 ? String(t) : t.toExponential().replace(/e([+-])(\d)$/, "e$10$2");
}

export function arrow(verify) {
  return verify ? "→ verify" : "→ skip";
}

export class Policy {
  constructor(cfg) {
    this.cfg = cfg;
    this.reset();
  }

  reset() {}

  alwaysVerifies() {
    return false;
  }

  /** Tokens decoded at the step -> the reward, tokens per forward, credited to the decision's action. */
  update(decision, decoded) {
    const reward = decoded / (decision.verify ? 2 : 1);
    this.learn(decision, reward);
    return reward;
  }

  /** Credit `reward` to the decision's action; only the bandit (contextual_bandit_ucb.js) learns. */
  learn(decision, reward) {} // eslint-disable-line no-unused-vars

  decision(verify, score, reason, details) {
    return { policy: this.constructor.policyName, verify, score, reason, details };
  }
}
