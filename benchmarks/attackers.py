"""The attackers of `benchmarks/load_test.py --attack`: one client (one address) doing what issue 19 found.

Each attacker is a set of threads sending raw HTTP as fast as the server answers, from one X-Forwarded-For
address, never reading a result (fire-and-forget): the worst case for the honest visitor, who is measured beside it.

- sessions: fresh session hashes, each joining a 512-token decode and a replay step (row 3);
- rest: the REST route with a decode's fn_index, and the public API by name without reading the result (rows 2, 5);
- replay: eight sessions holding the heaviest trace the validator accepts, spamming its heaviest steps and reading
  every result (so only the per-client cap on pending events binds it, not the cap on unread results) (row 6).
- spelled (issue 29, row 1): the same rules under other spellings of Content-Type (`Application/JSON`, a charset,
  `text/plain`): a fresh-session decode, a private event by name, a 9,000-character string;
- heartbeats (row 2): heartbeat streams of fresh session ids opened and closed (each close runs the unload event);
- cancel (row 5): a decode joined and cancelled at once through Gradio's /cancel, over and over.
Every answer's HTTP status is counted: refusals are the point.
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import httpx

ATTACKER_IP = "10.66.0.1"


class Attacker:
    """Threads running `step(http)` until stopped; counts the status codes of the answers."""

    def __init__(self, url: str, fns: dict[str, int], knobs: Callable[[int], list], threads: int = 8) -> None:
        self.url, self.fns, self.knobs, self.threads = url, fns, knobs, threads
        self.codes: Counter = Counter()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._workers: list[threading.Thread] = []

    def join(self, http: httpx.Client, fn: str, data: list, session: str) -> None:
        body = {"data": data, "fn_index": self.fns[fn], "session_hash": session, "event_data": None,
                "trigger_id": None}
        self.count(http.post(self.url + "/gradio_api/queue/join", json=body))

    def count(self, response: httpx.Response) -> None:
        with self._lock:
            self.codes[response.status_code] += 1

    def prepare(self) -> None:
        """Anything the attack needs before it starts (replay: upload the heavy trace)."""

    def step(self, http: httpx.Client, i: int) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self.prepare()

        def loop(k: int) -> None:
            with httpx.Client(headers={"x-forwarded-for": ATTACKER_IP}, timeout=30) as http:
                i = 0
                while not self._stop.is_set():
                    try:
                        self.step(http, k * 1_000_000 + i)
                    except httpx.HTTPError as exc:
                        with self._lock:
                            self.codes[type(exc).__name__] += 1
                        time.sleep(0.05)
                    i += 1

        self._workers = [threading.Thread(target=loop, args=(k,), daemon=True) for k in range(self.threads)]
        for w in self._workers:
            w.start()

    def stop(self) -> Counter:
        self._stop.set()
        for w in self._workers:
            w.join(timeout=40)
        return self.codes


class FreshSessions(Attacker):
    def step(self, http: httpx.Client, i: int) -> None:
        session = uuid.uuid4().hex[:11]
        self.join(http, "run", ["Once upon a time", "tiny", *self.knobs(512)], session)
        self.join(http, "step", [None, 1, "auto", "state", None], session)


class RestRoute(Attacker):
    def step(self, http: httpx.Client, i: int) -> None:
        for fn in ("run", "compare"):
            self.count(http.post(self.url + "/gradio_api/run/predict",
                                 json={"data": [], "fn_index": self.fns[fn], "session_hash": f"r{i}"}))
        self.count(http.post(self.url + "/gradio_api/call/run",
                             json={"data": ["Once upon a time", "tiny", *self.knobs(512)]}))


class ReplayFlood(Attacker):
    """Eight sessions upload the heaviest accepted trace once, then spam steps of it."""

    def __init__(self, *args: Any, trace_path: Path, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trace_path, self.sessions, self.steps = trace_path, [], 1

    def prepare(self) -> None:
        from gradio_client import Client, handle_file

        for _ in range(8):
            client = Client(self.url, verbose=False, headers={"X-Forwarded-For": ATTACKER_IP})
            status = client.predict(handle_file(str(self.trace_path)), api_name="/upload_trace")[0]
            if status == "Loaded the uploaded trace.":
                self.sessions.append(client)
        self.steps = max(1, len(json.loads(self.trace_path.read_text())["steps"]))
        for client in self.sessions:
            threading.Thread(target=self.drain, args=(client.session_hash,), daemon=True).start()

    def drain(self, session: str) -> None:
        """Read the session's results as they come (reopening the stream when Gradio closes it)."""
        url = self.url + f"/gradio_api/queue/data?session_hash={session}"
        with httpx.Client(headers={"x-forwarded-for": ATTACKER_IP}, timeout=60) as http:
            while not self._stop.is_set():
                try:
                    with http.stream("GET", url) as stream:
                        for _ in stream.iter_lines():
                            if self._stop.is_set():
                                return
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)

    def step(self, http: httpx.Client, i: int) -> None:
        if not self.sessions:
            time.sleep(0.1)
            return
        client = self.sessions[i % len(self.sessions)]
        self.join(http, "step", [None, (i * 7) % self.steps + 1, "auto", "p", None], client.session_hash)

    def stop(self) -> Counter:
        codes = super().stop()
        for client in self.sessions:
            client.close()
        return codes


SPELLINGS = ("Application/JSON", "APPLICATION/JSON; charset=utf-8", "text/plain")


class SpelledHeader(Attacker):
    def post(self, http: httpx.Client, path: str, body: dict, i: int) -> None:
        headers = {"content-type": SPELLINGS[i % len(SPELLINGS)]}
        self.count(http.post(self.url + path, content=json.dumps(body), headers=headers))

    def step(self, http: httpx.Client, i: int) -> None:
        session = uuid.uuid4().hex[:11]
        self.post(http, "/gradio_api/queue/join", {"data": ["Once upon a time", "tiny", *self.knobs(512)],
                                                  "fn_index": self.fns["run"], "session_hash": session}, i)
        self.post(http, "/gradio_api/call/html_replay", {"data": [None, 0]}, i)
        self.post(http, "/gradio_api/queue/join", {"data": ["x" * 9000, 1, "auto", "state", None],
                                                  "fn_index": self.fns["step"], "session_hash": session}, i)


class Heartbeats(Attacker):
    def step(self, http: httpx.Client, i: int) -> None:
        with http.stream("GET", self.url + f"/gradio_api/heartbeat/hb{uuid.uuid4().hex[:10]}") as beat:
            self.count(beat)
            if beat.status_code == 200:
                next(beat.iter_lines(), None)


class CancelledRuns(Attacker):
    def step(self, http: httpx.Client, i: int) -> None:
        session = uuid.uuid4().hex[:11]
        body = {"data": ["Once upon a time", "tiny", *self.knobs(512)], "fn_index": self.fns["run"],
                "session_hash": session, "event_data": None, "trigger_id": None}
        answer = http.post(self.url + "/gradio_api/queue/join", json=body)
        self.count(answer)
        if answer.status_code == 200:
            self.count(http.post(self.url + "/gradio_api/cancel", json={
                "session_hash": session, "fn_index": self.fns["run"], "event_id": answer.json()["event_id"]}))


ATTACKS = {"sessions": FreshSessions, "rest": RestRoute, "replay": ReplayFlood, "spelled": SpelledHeader,
           "heartbeats": Heartbeats, "cancel": CancelledRuns}
