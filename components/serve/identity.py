"""Who a request comes from, in a form a visitor cannot mint: the signed-in user, else the client's network address.

Fairness (components/serve/gpu_slot.py, components/serve/front_door.py) is keyed on this, not on Gradio's session hash, which the
client chooses. Behind a reverse proxy (a Hugging Face Space) the socket peer is the proxy, and the visitor's address
is the entry the last trusted proxy appended to `X-Forwarded-For`: with `S2D2_TRUSTED_PROXY_HOPS` = N the client is
the N-th address from the right of that list (everything to its left was written by the client and is ignored).
The default is 1 on a Space (`SPACE_ID` is set) and 0 elsewhere (the socket peer; a forwarded header is never
trusted). IPv6 addresses are grouped by /64, the block one subscriber gets. A visitor signed in with Hugging Face
OAuth (a Space with `hf_oauth: true`; the sign-in lives in the session cookie Gradio's SessionMiddleware reads, in
front of the front door) is keyed by account name instead, so students sharing an address (a class behind one NAT)
who sign in are told apart; anonymous visitors share their address. The front door (a raw ASGI scope), a handler
(a gr.Request) and a queued event (its Starlette request) all read the same two things, so they always agree.

Identity is only as good as these settings, so `identity_settings()` (app.py calls it at start) refuses
`FORWARDED_ALLOW_IPS=*` (uvicorn would then rewrite the peer from a header any client writes) and refuses proxy hops
trusted off a Space without `S2D2_TRUSTED_PROXIES` (the proxies' addresses or networks, comma separated): a client
that reaches the app directly would write its own X-Forwarded-For and be a new visitor at every request. On a Space
(SPACE_ID set) the default of one hop stays allowed: its proxy is the only way in. With S2D2_TRUSTED_PROXIES set,
X-Forwarded-For is read only on a connection from one of them. A request that reaches
the app without the header while hops are trusted (it skipped the proxy) is logged once, loudly.

The current request's key is also kept in a context variable while a handler runs (components/serve/gpu_slot.py sets it), so
code deep in a handler (the state store, the export folder) can charge its bytes to the right visitor.
"""
from __future__ import annotations

import contextvars
import importlib.util
import ipaddress
import logging
import os
import time
from typing import Any, Iterable, Mapping, Optional

LOCAL = "local"  # the key outside any request (tests, scripts, start-up)
LOG = logging.getLogger("s2d2.app")
FORGEABLE = ("⚠ CLIENT IDENTITY CAN BE FORGED: S2D2_TRUSTED_PROXY_HOPS={hops} trusts X-Forwarded-For, {why}; a "
             "client that reaches the app directly writes its own address and escapes every per-visitor limit. "
             "Serve the app only through the proxy, and set S2D2_TRUSTED_PROXIES to the proxy's address (or "
             "network), or set S2D2_TRUSTED_PROXY_HOPS=0.")
REFUSED_HOPS = ("S2D2_TRUSTED_PROXY_HOPS={hops} trusts X-Forwarded-For from any connection: set S2D2_TRUSTED_PROXIES "
                "to your proxy's address or network (e.g. 127.0.0.1 for a proxy on this machine), or set "
                "S2D2_TRUSTED_PROXY_HOPS=0; a client reaching the app directly could otherwise name any address.")
_WARNED: set = set()
_CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("s2d2_client", default=LOCAL)


def trusted_hops() -> int:
    """S2D2_TRUSTED_PROXY_HOPS (0-8): proxies in front of the app that append to X-Forwarded-For."""
    raw = os.environ.get("S2D2_TRUSTED_PROXY_HOPS", "").strip()
    if not raw:
        return 1 if os.environ.get("SPACE_ID") else 0
    try:
        hops = int(raw)
    except ValueError:
        raise ValueError(f"S2D2_TRUSTED_PROXY_HOPS: expected a whole number 0-8, got {raw[:40]!r}") from None
    if not 0 <= hops <= 8:
        raise ValueError(f"S2D2_TRUSTED_PROXY_HOPS: expected a whole number 0-8, got {hops}")
    return hops


def trusted_proxies() -> list:
    """S2D2_TRUSTED_PROXIES: the networks a forwarded header is read from (empty: any peer, as hops say)."""
    raw = os.environ.get("S2D2_TRUSTED_PROXIES", "").strip()
    nets = []
    for part in filter(None, (p.strip() for p in raw.split(","))):
        try:
            nets.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(f"S2D2_TRUSTED_PROXIES: expected IP addresses or networks, got {part[:40]!r}") from None
    return nets


def identity_settings() -> list[str]:
    """Check the settings client identity rests on (see the module docstring): ValueError, in one line, for one
    that lets any client choose its address (FORWARDED_ALLOW_IPS=*, or proxy hops trusted from any connection off
    a Space); the warnings (also logged) for one that is only redundant."""
    allow = os.environ.get("FORWARDED_ALLOW_IPS")
    if allow is not None and "*" in allow:
        raise ValueError("FORWARDED_ALLOW_IPS=* lets any client choose its address (uvicorn rewrites the peer from "
                         "X-Forwarded-For): unset it; behind a proxy set S2D2_TRUSTED_PROXY_HOPS instead.")
    warnings = []
    hops, proxies = trusted_hops(), trusted_proxies()
    if allow and allow.strip():
        warnings.append(f"FORWARDED_ALLOW_IPS={allow[:60]!r}: uvicorn rewrites the peer from X-Forwarded-For for "
                        "those addresses, and S2D2_TRUSTED_PROXY_HOPS counts the same header again; unset it.")
    if hops and not proxies and not os.environ.get("SPACE_ID"):
        raise ValueError(REFUSED_HOPS.format(hops=hops))
    for line in warnings:
        LOG.warning(line)
    return warnings


def _direct(peer: Optional[str], hops: int) -> None:
    if hops and "direct" not in _WARNED:
        _WARNED.add("direct")
        LOG.warning(FORGEABLE.format(hops=hops, why=f"but a request from {str(peer)[:60]} came without it (it did "
                                                    "not pass the proxy)"))


def _trusted_peer(peer: Optional[str], proxies: list) -> bool:
    if not proxies:
        return True
    try:
        ip = ipaddress.ip_address(address_key(peer)[3:].split("/")[0])
    except ValueError:
        return False
    return any(ip in net for net in proxies)


def address_key(address: Optional[str]) -> str:
    """'ip:1.2.3.4', 'ip:2001:db8:1:2::/64' (IPv6 by /64), or 'addr:<text>' for something that is not an IP."""
    text = (address or "").strip()
    if text.startswith("[") and "]" in text:  # [v6]:port
        text = text[1:text.index("]")]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return "addr:" + (text[:64] or "unknown")
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is None:
        return "ip:" + str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return "ip:" + str(ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else ip)


def forwarded_client(forwarded_for: Iterable[str], peer: Optional[str], hops: int) -> Optional[str]:
    """The client address: the `hops`-th entry from the right of the joined X-Forwarded-For values, the socket
    peer with hops = 0 (or when no proxy wrote the header)."""
    if hops <= 0 or not _trusted_peer(peer, trusted_proxies()):
        return peer
    chain = [part.strip() for value in forwarded_for for part in str(value).split(",") if part.strip()]
    if not chain:
        _direct(peer, hops)
        return peer
    return chain[-hops] if len(chain) >= hops else chain[0]


def signed_in(session: Any) -> Optional[str]:
    """The Hugging Face account name in a session (Gradio's OAuth `oauth_info`), None when signed out or expired."""
    info = session.get("oauth_info") if isinstance(session, Mapping) else None
    if not isinstance(info, Mapping):
        return None
    expires = info.get("expires_at")
    if isinstance(expires, (int, float)) and expires < time.time():
        return None
    user = info.get("userinfo")
    name = user.get("preferred_username") if isinstance(user, Mapping) else None
    return name if isinstance(name, str) and name else None


def sign_in_offered() -> bool:
    """Does this Space offer Hugging Face sign-in? (`hf_oauth: true` in the Space's README metadata makes the
    Space set OAUTH_CLIENT_ID.) The page shows a sign-in button only then, so a local run is unchanged. Gradio's
    sign-in needs its `oauth` extra (itsdangerous, and authlib on a Space): without it the app still starts, with
    no button and one loud line in the log."""
    if not os.environ.get("OAUTH_CLIENT_ID", "").strip():
        return False
    needed = ["itsdangerous"] + (["authlib"] if os.environ.get("SPACE_ID") else [])
    missing = [name for name in needed if not installed(name)]
    if missing:
        LOG.warning("OAUTH_CLIENT_ID is set but %s is not installed: add gradio[oauth] to requirements.txt to "
                    "offer sign-in (visitors are told apart by address until then).", ", ".join(missing))
    return not missing


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def client_key(headers: Any, peer: Optional[str], username: Optional[str] = None,
               hops: Optional[int] = None) -> str:
    """The fairness key of one request (see the module docstring)."""
    if username:
        return "user:" + str(username)[:80]
    values = _header_values(headers, "x-forwarded-for")
    return address_key(forwarded_client(values, peer, trusted_hops() if hops is None else hops))


def request_key(request: Any) -> str:
    """client_key of a gr.Request (or a Starlette request: a queued event's); LOCAL without one. The account is
    the OAuth sign-in in the request's session, as the front door reads it (`scope_key`)."""
    if request is None:
        return LOCAL
    raw = getattr(request, "request", None) or request  # gr.Request wraps the Starlette request
    client = getattr(raw, "client", None)
    peer = getattr(client, "host", None) if client is not None else None
    if isinstance(client, Mapping):  # a pickled gr.Request keeps plain dicts
        peer = client.get("host")
    scope = getattr(raw, "scope", None)
    user = signed_in(scope.get("session")) if isinstance(scope, Mapping) else None
    return client_key(getattr(raw, "headers", {}) or {}, peer, user)


def scope_key(scope: Mapping[str, Any]) -> str:
    """client_key of a raw ASGI scope (the front door sees requests before Gradio does)."""
    headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope.get("headers", ())]
    client = scope.get("client")
    return client_key(headers, client[0] if client else None, signed_in(scope.get("session")))


def _header_values(headers: Any, name: str) -> list[str]:
    if hasattr(headers, "getlist"):  # Starlette Headers: every X-Forwarded-For line
        return list(headers.getlist(name))
    if isinstance(headers, Mapping):
        value = headers.get(name) or headers.get(name.title())
        return [value] if value else []
    return [v for k, v in headers if k == name]


def current() -> str:
    """The key of the request the calling handler serves (LOCAL outside one)."""
    return _CURRENT.get()


def set_current(key: str) -> contextvars.Token:
    return _CURRENT.set(key)


def reset_current(token: contextvars.Token) -> None:
    _CURRENT.reset(token)
