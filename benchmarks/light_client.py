"""A light student page for `load_test --classroom --one-address --client light`: Gradio's HTTP queue protocol
spoken directly with httpx, so the benchmark's thirty students stop measuring their own client library.

Why: with `gradio_client` each step cost the student about 60 ms of CPU (a new httpx client, with its TLS context,
for every join and every result stream; three thread pools per page; a result read by polling every 50 ms), and the
thirty student threads used 20-28 CPU s of their one core in 35 s: the figure measured the clients first. A browser
spends none of that. This page does what the server's rules need of a page, and nothing more:

- it loads the page's config once (GET /config, as the browser and gradio_client do; the front door serves it from
  its page cache), to know each event's fn index and which of its inputs and outputs are State (the values a page
  holds: sent as None, and left out of the answer, exactly as gradio_client does);
- it holds its heartbeat open (GET /gradio_api/heartbeat/<session>) while it lives: the server creates the session's
  state there, under its new-session rule, and counts the page as one of its unit's members only while that
  stream is open (components/serve/roster.py); closing the page shuts that socket, so the server sees it leave at
  once;
- an event is joined as gradio_client joins it: POST /gradio_api/queue/join with {data, fn_index, session_hash} (the
  fn index of the api name, from the config) and its `x-gradio-user: api` header; then its result stream (GET
  /gradio_api/queue/data?session_hash=...) is read to its end (the server's close_stream after the completed
  message).

Every answer is checked: `predict` returns only when the stream's process_completed message for this event says
success and carries one value per output; otherwise it raises `StepFailed` with the server's line. A join the door
refuses raises httpx.HTTPStatusError (as gradio_client does), whose response carries the door's one line. What it
leaves out of gradio_client: GET /gradio_api/info (gradio_client reads it for parameter names; no server rule needs
it), file uploads and downloads (a step and an example's opening take and return none), telemetry. Plain http only
(the benchmark's server is on loopback).
"""
from __future__ import annotations

import json
import socket
import threading
import uuid
from typing import Any, Iterable, Optional

import httpx

API = "gradio_api"
COMPLETED, CLOSE_STREAM, HEARTBEAT = "process_completed", "close_stream", "heartbeat"


class StepFailed(Exception):
    """An event the server accepted but did not answer with its outputs (an error, a refusal inside the queue, a
    stream cut short): one line, the server's own where it sent one."""


class Endpoint:
    """What a page needs of one event from the config: its fn index, which inputs are State (sent as None) and which
    outputs are skipped in the answer (State and other skip_api components, as gradio_client skips them)."""

    def __init__(self, fn_index: int, state_inputs: list[bool], skipped_outputs: list[bool]) -> None:
        self.fn_index, self.state_inputs, self.skipped_outputs = fn_index, state_inputs, skipped_outputs

    def values(self, args: tuple) -> list:
        """The event's data as gradio_client sends it: None inserted at every State input's place."""
        out = list(args)
        for i, is_state in enumerate(self.state_inputs):
            if is_state:
                out.insert(i, None)
        return out

    def answer(self, data: list) -> Any:
        """The outputs as gradio_client returns them: skipped ones left out, a single one unwrapped."""
        kept = [v for v, skip in zip(data, self.skipped_outputs) if not skip]
        return kept[0] if len(kept) == 1 else tuple(kept)


def endpoints(config: dict) -> dict[str, Endpoint]:
    """The config's public events by api name ("/step"), as gradio_client finds them (private ones left out)."""
    components = {c["id"]: c for c in config.get("components", [])}

    def is_state(cid: int) -> bool:
        return components.get(cid, {}).get("type") == "state"

    def skipped(cid: int) -> bool:
        c = components.get(cid, {})
        return bool(c.get("skip_api", c.get("type") == "state"))

    found = {}
    for i, dep in enumerate(config.get("dependencies", [])):
        name = dep.get("api_name")
        if not isinstance(name, str) or dep.get("api_visibility") == "private":
            continue
        found["/" + name] = Endpoint(dep.get("id", i), [is_state(c) for c in dep.get("inputs", [])],
                                     [skipped(c) for c in dep.get("outputs", [])])
    return found


def sse_messages(lines: Iterable[str]) -> Iterable[dict]:
    """The JSON messages of a Gradio event stream's `data:` lines (blank lines between them skipped)."""
    for line in lines:
        if line.startswith("data:"):
            yield json.loads(line[5:])
        elif line.strip():
            raise StepFailed(f"unexpected line in the result stream: {line[:60]!r}")


def completed_data(messages: Iterable[dict], event_id: str, outputs: int) -> list:
    """The output data of `event_id`'s process_completed message, read to the stream's end (close_stream or the
    server ending it). Raises StepFailed unless that message says success and carries `outputs` values."""
    data: Optional[list] = None
    failure = "the result stream ended before the event completed"
    for msg in messages:
        kind = msg.get("msg")
        if kind == CLOSE_STREAM:
            break
        if kind == COMPLETED and msg.get("event_id") == event_id:
            output = msg.get("output") or {}
            got = output.get("data")
            if msg.get("success", False) and isinstance(got, list) and len(got) == outputs:
                data, failure = got, ""
            else:
                data, failure = None, str(output.get("error") or f"completed without its {outputs} outputs")[:200]
        elif kind == "unexpected_error":
            failure = str(msg.get("message") or "the server reported an unexpected error")[:200]
    if data is None:
        raise StepFailed(failure)
    return data


class Heartbeat:
    """The page's heartbeat stream, held open on a thread of its own until `close` shuts its socket (which ends a
    blocked read at once, so the server sees the page leave at once)."""

    def __init__(self, http: httpx.Client, url: str) -> None:
        self._http, self._url = http, url
        self._sock: Optional[socket.socket] = None
        self._closed = threading.Event()
        self.opened = threading.Event()  # set once the server answered 200 (or it failed: see `status`)
        self.status: Optional[int] = None
        self._thread = threading.Thread(target=self._hold, daemon=True)
        self._thread.start()

    def _hold(self) -> None:
        try:
            with self._http.stream("GET", self._url, timeout=httpx.Timeout(30, read=None)) as beat:
                self.status = beat.status_code
                stream = beat.extensions.get("network_stream")
                self._sock = stream.get_extra_info("socket") if stream is not None else None
                self.opened.set()
                if beat.status_code != 200 or self._closed.is_set():
                    return
                for _ in beat.iter_bytes():  # the server's heartbeat messages; nothing to do with them
                    if self._closed.is_set():
                        return
        except (httpx.HTTPError, OSError):
            pass  # shut by close(), or the server went away: either way the page has left
        finally:
            self.opened.set()

    def close(self) -> None:
        self._closed.set()
        self.opened.wait(30)
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the server
        self._thread.join(timeout=5)


class LightPage:
    """One student's page: config, heartbeat, events joined and read as gradio_client does (module docstring). The
    same calls as gradio_client's Client where the benchmark uses them: predict(*args, api_name=...),
    session_hash, close()."""

    def __init__(self, url: str, headers: Optional[dict[str, str]] = None, timeout: float = 300.0) -> None:
        if not url.startswith("http://"):
            raise ValueError("the light page speaks plain http only (the benchmark's server is on loopback)")
        self.url = url if url.endswith("/") else url + "/"
        self.session_hash = str(uuid.uuid4())
        self._http = httpx.Client(headers=headers or {}, timeout=timeout)
        self._beat: Optional[Heartbeat] = None
        try:
            config = self._http.get(self.url + "config")
            config.raise_for_status()  # a refused page load: the door's line is in the response
            self._endpoints = endpoints(config.json())
            self._beat = Heartbeat(self._http, f"{self.url}{API}/heartbeat/{self.session_hash}")
            self._beat.opened.wait(timeout)
            if self._beat.status != 200:
                raise StepFailed(f"the page's heartbeat was answered {self._beat.status}")
        except BaseException:
            self.close()
            raise

    def predict(self, *args: Any, api_name: str) -> Any:
        """Join the event, read its result stream to the end, and return its outputs (as gradio_client does);
        httpx.HTTPStatusError for a refused join, StepFailed for an event that completed without its outputs."""
        endpoint = self._endpoints.get(api_name)
        if endpoint is None:
            raise ValueError(f"no public event named {api_name!r}")
        body = {"data": endpoint.values(args), "fn_index": endpoint.fn_index, "session_hash": self.session_hash}
        joined = self._http.post(f"{self.url}{API}/queue/join", json=body, headers={"x-gradio-user": "api"})
        joined.raise_for_status()
        event_id = joined.json()["event_id"]
        with self._http.stream("GET", f"{self.url}{API}/queue/data",
                               params={"session_hash": self.session_hash}) as stream:
            if stream.status_code != 200:
                raise StepFailed(f"the result stream was answered {stream.status_code}")
            data = completed_data(sse_messages(stream.iter_lines()), event_id, len(endpoint.skipped_outputs))
        return endpoint.answer(data)

    def close(self) -> None:
        if self._beat is not None:
            self._beat.close()
        self._http.close()


def light_page(url: str, address: str) -> LightPage:
    """A student's light page seen from forwarded `address` (benchmarks/class_runs.py's `client`, lighter)."""
    return LightPage(url, headers={"X-Forwarded-For": address}, timeout=300)
