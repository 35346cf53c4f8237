"""Finding things in Gradio's own objects for the front door (components/serve/front_door.py): the app's Blocks
behind a request, an event by its API name, the session an event id belongs to. Each answers None (or its
fallback) rather than fail on an app that is not configured yet."""
from __future__ import annotations

from typing import Any


def by_name(fns: dict, name: str) -> Any:
    """The event function whose API name is `name`, or None."""
    return next((fn for fn in fns.values() if fn.api_name == name), None)


def blocks_of(scope: dict) -> Any:
    """The Blocks of the Gradio app serving `scope`, or None."""
    app = scope.get("app")
    try:
        return app.get_blocks() if app is not None and hasattr(app, "get_blocks") else None
    except Exception:  # the app is not configured yet
        return None


def session_of_event(blocks: Any, event_id: str) -> str:
    """The session an event id belongs to (an API call without a session hash is its own session)."""
    queue = getattr(blocks, "_queue", None)
    event = getattr(queue, "event_ids_to_events", {}).get(event_id) if queue is not None else None
    if event is not None:
        return event.session_hash
    pending = getattr(queue, "pending_event_ids_session", {}) if queue is not None else {}
    return next((s for s, ids in list(pending.items()) if event_id in ids), event_id)
