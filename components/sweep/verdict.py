"""The Sweep tab's headline: S2D2 beside the cheapest baseline that is as accurate, and a plain verdict.

A baseline cell is *as accurate* as an S2D2 cell when its accuracy is at least as high, or when the sweep cannot
tell the two apart: McNemar's exact test on the same problems gives p ≥ ALPHA (for a file without per-problem
results: their 95 % intervals overlap). Each S2D2 cell is matched with the as-accurate baseline that needs the
fewest forwards per token; the headline shows the S2D2 cell whose match it beats by the most (or loses to by the
least) and says plainly whether S2D2 wins on this model: a win takes at least WIN_MARGIN (10 %) fewer forwards
per token, a smaller gap either way is "no clear winner", and the same sentence gives both accuracies with their
95 % Wilson intervals and McNemar's p. An S2D2 cell more accurate than every baseline (no match)
is named too. The match is made on forwards (exact counts), so a last sentence says how the two cells compare in
wall time, which can go the other way (forwards that read more tokens take longer), and on what machine that was
measured: what the file's `meta` records (device, precision, how many questions decoded at once); it names no
processor.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from s2d2.sweeps.stats import paired_p
from s2d2.sweeps.grid import accuracy_interval, format_p

from components.escape import md_text
from components.views.plural import plural

ALPHA = 0.05
WIN_MARGIN = 0.10  # forwards are exact counts, but a gap this small is within what one preset knob moves


@dataclass(frozen=True)
class Match:
    s2d2: dict[str, Any]
    baseline: Optional[dict[str, Any]]  # None: no baseline is as accurate
    p: Optional[float]  # McNemar's p between the two (None without per-problem results)

    @property
    def ratio(self) -> Optional[float]:
        """Baseline forwards per token ÷ S2D2's: above 1, S2D2 needs fewer."""
        if self.baseline is None or not self.s2d2["nfe_per_token"]:
            return None
        return self.baseline["nfe_per_token"] / self.s2d2["nfe_per_token"]


def as_accurate(base: dict[str, Any], cell: dict[str, Any]) -> tuple[bool, Optional[float]]:
    """(is `base` as accurate as `cell`, the paired p) by the rule in the module docstring."""
    p = paired_p(base.get("correct_by_problem"), cell.get("correct_by_problem"))
    if base["accuracy"] >= cell["accuracy"]:
        return True, p
    if p is not None:
        return p >= ALPHA, p
    a, b = accuracy_interval(base), accuracy_interval(cell)
    if a is None or b is None:  # no sizes to test with: the point estimates decide (said in the headline)
        return False, None
    return a[1] >= b[0], None


def _basis(cells: list[dict[str, Any]], cell: dict[str, Any]) -> str:
    """How "more accurate than every baseline" was decided for `cell`."""
    bases = [c for c in cells if c["method"] == "dynamic" and c.get("accuracy") is not None]
    top = max(bases, key=lambda c: c["accuracy"], default=None)
    if top is None:
        return ""
    if paired_p(top.get("correct_by_problem"), cell.get("correct_by_problem")) is not None:
        return f" (McNemar p < {ALPHA:g} against each, on the same problems)"
    if accuracy_interval(top) is not None and accuracy_interval(cell) is not None:
        return " (their 95 % intervals do not overlap)"
    return " (by the point estimates only: the file has no per-problem results or sizes to test it)"


def matches(cells: list[dict[str, Any]]) -> list[Match]:
    """Every S2D2 cell with its cheapest as-accurate baseline (by forwards per token)."""
    usable = [c for c in cells if c.get("accuracy") is not None and c.get("nfe_per_token") is not None]
    bases = sorted((c for c in usable if c["method"] == "dynamic"), key=lambda c: c["nfe_per_token"])
    out = []
    for cell in (c for c in usable if c["method"] == "s2d2"):
        hit = next(((b, p) for b in bases for ok, p in [as_accurate(b, cell)] if ok), (None, None))
        out.append(Match(cell, *hit))
    return out


def best_match(cells: list[dict[str, Any]]) -> Optional[Match]:
    """The S2D2 cell that does best against its match (largest ratio); None without a matched S2D2 cell."""
    found = [m for m in matches(cells) if m.ratio is not None]
    return max(found, key=lambda m: m.ratio, default=None)  # type: ignore[arg-type, return-value]


def _cell(c: dict[str, Any]) -> str:
    wall = c.get("wall_per_token")
    ms = f", {1000 * wall:.2g} ms/token" if wall is not None else ""
    return f"**{md_text(c['name'], 80)}** ({c['nfe_per_token']:.3f} forwards/token{ms}, accuracy {c['accuracy']:.3f})"


def _cost(c: dict[str, Any]) -> str:
    wall = c.get("wall_per_token")
    ms = f", {1000 * wall:.2g} ms/token" if wall is not None else ""
    return f"**{md_text(c['name'], 80)}** ({c['nfe_per_token']:.3f} forwards/token{ms})"


def _interval(c: dict[str, Any], words: str = "95 % interval ") -> str:
    ci = accuracy_interval(c)
    return "" if ci is None else f" ({words}{ci[0]:.2f}–{ci[1]:.2f})"


def accuracy_clause(m: Match) -> str:
    """Both accuracies with their 95 % intervals and what the sweep can say about the gap, in words."""
    s, b = m.s2d2, m.baseline
    assert b is not None
    both = f"S2D2's accuracy is {s['accuracy']:.3f}{_interval(s)} against {b['accuracy']:.3f}{_interval(b, '')}"
    p = f"McNemar p = {format_p(m.p)} on the same problems" if m.p is not None else ""
    if s["accuracy"] == b["accuracy"]:
        ci = accuracy_interval(s)
        notes = [f"95 % interval {ci[0]:.2f}–{ci[1]:.2f}"] * (ci is not None) + [p] * bool(p)
        return f"both are {s['accuracy']:.3f} accurate" + (f" ({'; '.join(notes)})" if notes else "")
    if m.p is not None and m.p < ALPHA:  # only a clearly better baseline can be "as accurate" with a small p
        return f"{both}, a real difference ({p})"
    gap = "a gap the sweep cannot tell from chance"
    return f"{both}, {gap} ({p})" if p else f"{both}, {gap} (the intervals overlap)"


def machine_words(meta: Optional[dict[str, Any]]) -> str:
    """Where a sweep's wall times were measured, from what its `meta` records (values escaped); the file never
    names the processor, so the words say "the machine that ran this sweep" and then what is known of it."""
    meta = meta or {}
    known = []
    device = str(meta.get("device") or "")
    if device:
        kind = "a CPU" if device.startswith("cpu") else "a GPU" if device.startswith(("cuda", "mps")) else ""
        known.append(kind or f"the device `{md_text(device, 40)}`")
    if meta.get("dtype"):
        known.append(f"{md_text(meta['dtype'], 20)} weights")
    batch = meta.get("batch_size")
    if isinstance(batch, int) and not isinstance(batch, bool):
        known.append("one question at a time" if batch == 1 else f"{plural(batch, 'question')} decoded together")
    world = meta.get("world_size")
    if isinstance(world, int) and not isinstance(world, bool) and world > 1:
        known.append(f"split over {world} processes")
    if not known:
        return "on the machine that ran this sweep (the file records nothing about it)"
    said = ", ".join(known[:-1]) + " and " + known[-1] if len(known) > 1 else known[0]
    return f"on the machine that ran this sweep: the file records {said}, but not which processor"


def wall_clause(m: Match, meta: Optional[dict[str, Any]] = None) -> str:
    """The matched pair in wall time, in words: each cell's milliseconds per token and which is faster by how much,
    with the machine they were measured on; "" when either cell has no wall time."""
    s, b = m.s2d2, m.baseline
    ws, wb = (s.get("wall_per_token"), b.get("wall_per_token")) if b is not None else (None, None)
    if not isinstance(ws, (int, float)) or not isinstance(wb, (int, float)) or ws <= 0 or wb <= 0:
        return ""
    ratio = ws / wb
    if ratio >= 1 + WIN_MARGIN:
        how = f"S2D2 is {ratio:.1f}× slower"
    elif ratio * (1 + WIN_MARGIN) <= 1:
        how = f"S2D2 is {1 / ratio:.1f}× faster"
    else:
        how = f"the two are within {100 * WIN_MARGIN:.0f} % of each other"
    return (f" In wall time the S2D2 cell took {1000 * ws:.2g} ms per token and the baseline {1000 * wb:.2g} ms, so "
            f"{how}, measured {machine_words(meta)}.")


def verdict(cells: list[dict[str, Any]], meta: Optional[dict[str, Any]] = None) -> str:
    """One Markdown paragraph (values from the file escaped); "" when the sweep has no S2D2 cell or no baseline.

    A win needs at least WIN_MARGIN fewer forwards per token than the matched baseline, a loss at least WIN_MARGIN
    more; a smaller gap either way is "no clear winner". Each sentence carries the margin and both accuracies with
    their uncertainty, and a last sentence the same pair in wall time (wall_clause, with `meta`'s machine)."""
    m = best_match(cells)
    alone = [x.s2d2 for x in matches(cells) if x.baseline is None]
    extra = ""
    if alone:
        top = min(alone, key=lambda c: c["nfe_per_token"])
        extra = f" {_cell(top)} is more accurate than every baseline{_basis(cells, top)}."
    if m is None:
        return extra.strip()
    ratio, acc, rule = m.ratio, accuracy_clause(m), f"{100 * WIN_MARGIN:.0f} %"
    extra = wall_clause(m, meta) + extra
    assert ratio is not None and m.baseline is not None
    pair = f"{_cost(m.s2d2)} against the cheapest baseline as accurate, {_cost(m.baseline)}"
    if ratio >= 1 + WIN_MARGIN:
        return (f"**S2D2 wins on this model**: {pair}: {ratio:.2f}× fewer forwards (a win takes at least {rule} "
                f"fewer); {acc}.{extra}")
    if ratio * (1 + WIN_MARGIN) > 1:
        side = f"{ratio:.2f}× fewer forwards" if ratio >= 1 else f"{1 / ratio:.2f}× more forwards"
        return (f"**No clear winner on this model**: {pair}: {side}, under the {rule} "
                f"a win or a loss takes; {acc}.{extra}")
    return (f"**S2D2 does not win on this model**: every S2D2 cell needs at least {rule} more forwards per token "
            f"than the cheapest baseline as accurate as it. The closest: {_cost(m.s2d2)} needs {1 / ratio:.2f}× "
            f"the forwards of {_cost(m.baseline)}; {acc}.{extra}")


RULE = (f"“As accurate” means a baseline at least as accurate, or one the sweep cannot tell apart (McNemar's exact "
        f"test on the same problems, p ≥ {ALPHA:g}). S2D2 wins only with at least {100 * WIN_MARGIN:.0f} % fewer "
        f"forwards per token than that baseline; a smaller gap either way is no clear winner.")
