"""The recorded decisions of a trace, each as the two floats it compared: a golden trace compared to a tolerance
(tests/support/recorded_floats.py) proves its decisions only if none of them lies within that tolerance of its threshold.

Each `Decision` is (where, value, threshold): the decoder decided by comparing `value` with `threshold`. Covered:
- the verifier, paper / sampled acceptance: the draw u against r = min(1, (q/p)^gamma), up to the first rejection;
  with `ratio_threshold`, every position's r against it (the extra commits after the rejection);
- the verifier, greedy_exact: argmax q against the runner-up (top_q[0] vs top_q[1]) up to the first rejection;
- the policies: score_threshold's s against tau; score_hysteresis's s against tau_on (state OFF) or tau_off (ON);
  UCB's verify against skip value when they differ, and its mean entropy against the entropy bins' edges;
- greedy drafts (temperature 0): the drafted token's p against the runner-up's;
- tau_conf (`confidence_threshold`), where a rule reads it (low_confidence_dynamic, always_check_high_conf, a
  dynamic score's N_hi, the editing loop): every draft's p against it;
- top-k picks by p (the fallback commits of the confidence rules): the lowest picked p against the highest p left.
Not covered, because the trace does not record both sides: sampled draws of drafts and residuals, the entropy
rule's running sums (entropy_bounded), the adaptive block's mean accepted prefix.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from tests.support.recorded_floats import slack


@dataclass(frozen=True)
class Decision:
    where: str
    value: float
    threshold: float

    @property
    def margin(self) -> float:
        return abs(self.value - self.threshold)

    @property
    def safe(self) -> bool:
        """Further apart than both sides may move: no kernel path can flip it within the tolerance."""
        return self.margin > slack(self.value) + slack(self.threshold)


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) != float("inf")


def decisions(trace: dict[str, Any]) -> Iterator[Decision]:
    """Every recorded decision of a trace (a golden's plain data) with the two floats it compared."""
    cfg = trace["header"]["config"]
    for i, s in enumerate(trace["steps"]):
        at = f"steps[{i}]"
        yield from _verification(cfg, s.get("verification"), at)
        yield from _policy(s.get("decision"), at)
        yield from _drafts(cfg, s, at)


def _verification(cfg: dict[str, Any], v: Any, at: str) -> Iterator[Decision]:
    if not v:
        return
    rows = v["positions"]
    upto = rows if v["first_reject"] is None else rows[: v["first_reject"] + 1]
    for j, r in enumerate(upto):
        where = f"{at}.verification.positions[{j}]"
        if v["mode"] == "greedy_exact":
            if len(r["top_q"]) > 1:
                yield Decision(where + " argmax q vs runner-up", r["top_q"][0]["prob"], r["top_q"][1]["prob"])
        elif r.get("u") is not None:
            yield Decision(where + " u vs r", r["u"], r["ratio"])
    if cfg.get("ratio_threshold") is not None and v["mode"] != "greedy_exact":
        for j, r in enumerate(rows):
            yield Decision(f"{at}.verification.positions[{j}] r vs ratio_threshold", r["ratio"],
                           cfg["ratio_threshold"])


def _policy(d: Any, at: str) -> Iterator[Decision]:
    if not d:
        return
    det, where = d["details"], f"{at}.decision ({d['policy']})"
    if d["policy"] == "score_threshold":
        yield Decision(where + " s vs tau", det["score"], det["score_threshold"])
    elif d["policy"] == "score_hysteresis":
        tau = det["hysteresis_on"] if det["state_before"] == "OFF" else det["hysteresis_off"]
        yield Decision(where + " s vs tau_on/off", det["score"], tau)
    elif d["policy"] == "contextual_bandit_ucb":
        ucb = det["ucb"]
        if _num(ucb["verify"]) and _num(ucb["skip"]) and ucb["verify"] != ucb["skip"]:
            yield Decision(where + " UCB verify vs skip", ucb["verify"], ucb["skip"])
        n = det["n_bins"][2]
        for k in range(1, n):
            yield Decision(where + f" mean entropy vs bin edge {k}/{n}", det["mean_entropy"], k / n)


def _reads_tau_conf(cfg: dict[str, Any], s: dict[str, Any]) -> bool:
    d = s.get("decision") or {}
    dynamic_score = "dynamic" in str((d.get("details") or {}).get("score_type", ""))
    return (cfg["remasking"] == "low_confidence_dynamic" or cfg["always_check_high_conf"] or dynamic_score
            or cfg.get("loop") == "editing")


def _drafts(cfg: dict[str, Any], s: dict[str, Any], at: str) -> Iterator[Decision]:
    drafts = s["drafts"]
    for j, dr in enumerate(drafts):
        where = f"{at}.drafts[{j}]"
        if cfg["temperature"] == 0 and len(dr["top"]) > 1 and dr["top"][0]["token"] == dr["token"]:
            yield Decision(where + " greedy draft p vs runner-up", dr["top"][0]["prob"], dr["top"][1]["prob"])
        if _reads_tau_conf(cfg, s):
            yield Decision(where + " p vs tau_conf", dr["p"], cfg["confidence_threshold"])
    if cfg["remasking"] in ("low_confidence_dynamic", "low_confidence_static"):
        picked = {c["position"] for c in s["commits"] if c["how"] == "fallback"}
        committed = {c["position"] for c in s["commits"]}
        chosen = [dr["p"] for dr in drafts if dr["position"] in picked]
        left = [dr["p"] for dr in drafts if dr["position"] not in committed]
        if chosen and left:
            yield Decision(f"{at} lowest picked p vs highest p left", min(chosen), max(left))
