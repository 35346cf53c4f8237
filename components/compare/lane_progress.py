"""What Compare says while its lanes run: one line per lane (waiting, decoding with its steps so far, or its runs
done), under a line naming the round. Fed the events of components/run/lane_rounds.py; pure, no gradio.

Every lane runs up to `1 + timed_rounds` times (a warm-up, then the timed rounds while the time budget allows a
whole round), so a lane's line counts its runs done "of up to" that many: a round that would not fit is skipped,
and the lines never promise a run that may not come.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.escape import md_text


@dataclass
class LaneBoard:
    """The lanes' progress so far: runs finished per lane, and the lane decoding now with its steps and seconds."""

    lanes: list[str]
    rounds: int  # warm-up + timed rounds: the most runs a lane can get
    done: dict[str, int] = field(default_factory=dict)
    running: str = ""
    steps: int = 0
    elapsed: float = 0.0
    round: int = 0
    titles: dict[str, str] = field(default_factory=dict)  # lane key -> what the page calls it (lane_names.py)

    def update(self, event: dict[str, Any]) -> None:
        """Take one lane_rounds event; events of other kinds (done, error, stopped) change nothing here."""
        lane = event.get("lane")
        if lane not in self.lanes:
            return
        if event.get("kind") == "progress":
            self.running, self.round = lane, int(event.get("round", 0))
            self.steps, self.elapsed = int(event.get("steps", 0)), float(event.get("elapsed", 0.0))
        elif event.get("kind") == "lane_done":
            self.done[lane] = self.done.get(lane, 0) + 1
            self.round = int(event.get("round", 0))
            if self.running == lane:
                self.running = ""

    def _line(self, lane: str) -> str:
        runs = self.done.get(lane, 0)
        name = f"**{md_text(self.titles.get(lane, lane), 120)}**"
        if lane == self.running:
            return (f"- {name}: decoding run {runs + 1} of up to {self.rounds}, {self.steps} "
                    f"step{'s' if self.steps != 1 else ''} so far ({self.elapsed:.1f} s)")
        if runs == 0:
            return f"- {name}: waiting"
        return f"- {name}: {runs} of up to {self.rounds} run{'s' if self.rounds != 1 else ''} done"

    def markdown(self) -> str:
        """The status box's text: which round, then one line per lane in the order they run."""
        if self.round == 0:
            head = f"Running the warm-up round: every lane decodes once, untimed (then up to {self.rounds - 1} timed rounds)."
        else:
            head = f"Running timed round {self.round} of up to {self.rounds - 1}: the wall times come from these runs."
        return head + "\n\n" + "\n".join(self._line(lane) for lane in self.lanes)
