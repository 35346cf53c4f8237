"""Words for what a configuration does and why a step was routed, computed from the config and the recorded
decision (never hard-coded per preset, so a changed preset can never leave a stale name on screen)."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from s2d2.config import DecodeConfig, preset, presets
from s2d2.trace import PolicyDecision
from s2d2.trace.fields import as_float

from components.views.trace_index import decisive


def _g(x: Any) -> str:
    return f"{float(x):g}".replace("-", "−")


def routing_words(cfg: DecodeConfig) -> str:
    """When an S2D2 configuration verifies, in plain words ("Verify when it expects a gain (K̂ ≥ 1)")."""
    policy = cfg.policy
    if policy == "always" or (policy == "mask_span_length" and cfg.min_span_length <= 1):
        return "Always verify"
    if policy == "never":
        return "Never verify"
    if policy == "mask_span_length":
        return f"Verify spans of {cfg.min_span_length} or more"
    if policy == "contextual_bandit_ucb":
        return "Learn when to verify (UCB bandit)"
    if policy == "cost_aware":
        return "Verify when it expects to save seconds (measured forward costs)"
    c = cfg.penalty_coef
    if policy == "score_threshold":
        if cfg.score_type == "difference_static":
            need = cfg.score_threshold + c
            return "Always verify" if need <= 0 else f"Verify when it expects a gain (K̂ ≥ {_g(need)})"
        return f"Verify when it expects a gain (K̂ − {_g(c)}·N_hi ≥ {_g(cfg.score_threshold)})"
    if policy == "score_hysteresis":
        on = ">" if cfg.hysteresis_strict else "≥"
        return f"Verify in runs (on at s {on} {_g(cfg.hysteresis_on)}, off at s < {_g(cfg.hysteresis_off)})"
    return f"Policy {policy}"


def plain_title(cfg: DecodeConfig | Mapping[str, Any]) -> str:
    """One line a newcomer reads: "Verify when it expects a gain (K̂ ≥ 1), block 4"."""
    if not isinstance(cfg, DecodeConfig):
        cfg = DecodeConfig.from_dict(dict(cfg))
    if cfg.method == "ar":
        return "One token per forward (autoregressive)"
    size = f"block {cfg.block_length}"
    if cfg.sub_block_length and cfg.sub_block_length != cfg.block_length:
        size += f", sub-block {cfg.sub_block_length}"
    if cfg.adaptive_block:
        size = f"adaptive blocks starting at {cfg.block_length}"
    beyond = [words for on, words in ((cfg.kv_reuse, "reusing the verifier's KV"),
                                      (cfg.fused_commit, "commits fused into drafts"),
                                      (cfg.trim_verify, "a trimmed verifier")) if on]
    size += "".join(f", {words}" for words in beyond)
    if cfg.loop == "editing":  # the LLaDA2.x loop
        tau = cfg.editing_threshold
        size += f", edits at p > {_g(tau)}" if tau is not None else ", LLaDA2 loop, no edits"
    if cfg.loop == "pipeline":  # D2F: several blocks in flight
        size += f", D2F pipeline (a block joins at {_g(cfg.block_add_threshold * 100)} % of the last)"
        if cfg.draft_confidence_threshold is not None:
            size += f", verified drafts need p > {_g(cfg.draft_confidence_threshold)}"
        if cfg.method == "s2d2" and not cfg.allow_resample:
            size += ", no resampling"
    if cfg.method == "s2d2" and cfg.acceptance == "greedy_exact":
        size += ", greedy-exact acceptance"
    if cfg.method == "diffusion":
        if cfg.remasking == "low_confidence_dynamic":
            return f"Diffusion alone (commit drafts with p > {_g(cfg.confidence_threshold)}), {size}"
        return f"Diffusion alone ({cfg.remasking.replace('_', ' ')}), {size}"
    return f"{routing_words(cfg)}, {size}"


def preset_choices() -> list[tuple[str, str]]:
    """Dropdown choices: the plain words first, the paper's name second."""
    return [(f"{plain_title(preset(name))} · {name}", name) for name in presets()]


def preset_note(name: str) -> str:
    """What the preset reduces to (the library's one line), for the line under the dropdown."""
    line = presets().get(name)
    return f"`{name}`: {line}" if line else ""


def decision_line(decision: Optional[PolicyDecision]) -> str:
    """The policy's reason, reprinted from its recorded numbers with the precision that decides the comparison (the
    recorded reason as it is when a number is missing or not a number: details are free-form in an upload)."""
    if decision is None:
        return "no routing (this method never verifies)"
    d = decision.details or {}
    score, k_hat = as_float(d.get("score")), as_float(d.get("k_hat"))
    c, n_hi = as_float(d.get("penalty_coef", 0)), as_float(d.get("n_hi", 0))
    if score is None or k_hat is None or c is None or n_hi is None or abs(score) == float("inf"):
        return decision.reason
    if decision.policy == "score_threshold" and as_float(d.get("score_threshold")) is not None:
        tau = as_float(d["score_threshold"])
        s_txt, t_txt = decisive(score, tau)  # type: ignore[arg-type]
        op = "≥" if decision.verify else "<"
        return f"{_expression(d, k_hat, s_txt)} {op} τ_score {t_txt} → {'verify' if decision.verify else 'skip'}"
    if decision.policy == "score_hysteresis" and "state_before" in d:
        on_before = d["state_before"] == "ON"
        ref = as_float(d.get("hysteresis_off" if on_before else "hysteresis_on"))
        if ref is None:
            return decision.reason
        s_txt, r_txt = decisive(score, ref)
        name = "τ_off" if on_before else "τ_on"
        if on_before:
            op = "≥" if decision.verify else "<"
        else:
            strict = d.get("strict", True)
            op = (">" if strict else "≥") if decision.verify else ("≤" if strict else "<")
        return (f"{d['state_before']}: {_expression(d, k_hat, s_txt)} {op} {name} {r_txt} → "
                f"{'verify' if decision.verify else 'skip'} ({d.get('state_after', '')})")
    return decision.reason


def _expression(d: Mapping[str, Any], k_hat: float, s_txt: str) -> str:
    """"s = K̂ − c = 2.10 − 1 = 1.10" from the recorded numbers (decision_line checked that they are numbers)."""
    places = len(s_txt.split(".")[1]) if "." in s_txt else 2
    k = f"{k_hat:.{places}f}"
    c, n_hi = as_float(d.get("penalty_coef", 0)), as_float(d.get("n_hi", 0))
    if d.get("score_type") == "difference_dynamic":
        return f"s = K̂ − c·N_hi = {k} − {_g(c)}·{_g(n_hi)} = {s_txt}"
    return f"s = K̂ − c = {k} − {_g(c)} = {s_txt}"
