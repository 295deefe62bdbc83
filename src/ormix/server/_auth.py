"""A local ORS server others can reach is not open to everyone: an API key, checked on every request.

Local environments run shell commands (sandboxed, but on your machine). `ormix serve` binds loopback by
default; on any other address it requires a key (`--api-key`, or the `ORMIX_SERVE_API_KEY` environment
variable) and refuses to start without one unless told `--insecure` (`exposure_problem`). With a key, every
request must carry it as `X-API-Key` — the header ormix's client sends a member's `api_key` in, so a member
reaches the server unchanged — and one without it (or with another) is answered 401 before it reaches the
environment: no session opens, no tool runs (`APIKeyGuard`). Serve over TLS (`--ssl-certfile`,
`--ssl-keyfile`) when the key crosses a network.

Example:
    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, False)
    >>> exposure_problem("127.0.0.1", None, insecure=False) is None
    True
    >>> print(exposure_problem("0.0.0.0", None, insecure=False))  # doctest: +ELLIPSIS
    serving on 0.0.0.0 makes the environments reachable from other machines...
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

#: The environment variable `ormix serve` reads its key from (better than `--api-key`: no shell history).
SERVE_API_KEY_ENV = "ORMIX_SERVE_API_KEY"

_Scope = MutableMapping[str, Any]
_ASGIApp = Callable[[_Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (only this machine can reach a server bound there). A name
    other than `localhost` counts as reachable: it may resolve to anything.

    Example:
        >>> is_loopback("::1"), is_loopback("127.0.0.5"), is_loopback("my-box"), is_loopback("")
        (True, True, False, False)
    """
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_problem(host: str, api_key: str | None, *, insecure: bool) -> str | None:
    """Why a server may not start on `host` as asked (`None`: it may): off loopback it needs a key, unless
    `insecure`.

    Example:
        >>> exposure_problem("0.0.0.0", "k", insecure=False) is None
        True
        >>> exposure_problem("10.1.2.3", None, insecure=True) is None
        True
    """
    if is_loopback(host) or api_key or insecure:
        return None
    return (
        f"serving on {host} makes the environments reachable from other machines, and they run commands "
        f"on this one: set a key in {SERVE_API_KEY_ENV} (or pass --api-key KEY), which every request must "
        f"carry as X-API-Key (a member sends its api_key there), or pass --insecure to serve without one"
    )


class APIKeyGuard:
    """ASGI middleware answering 401 to every request whose `X-API-Key` is not `api_key` (compared in
    constant time); the lifespan passes through.

    Example:
        >>> import asyncio
        >>> async def app(scope, receive, send):
        ...     await send({"type": "http.response.start", "status": 200, "headers": []})
        >>> sent = []
        >>> async def send(message):
        ...     sent.append(message)
        >>> guard = APIKeyGuard(app, "k")
        >>> asyncio.run(guard({"type": "http", "headers": [(b"x-api-key", b"k")]}, None, send))
        >>> asyncio.run(guard({"type": "http", "headers": []}, None, send))
        >>> [m["status"] for m in sent if "status" in m]
        [200, 401]
    """

    def __init__(self, app: Any, api_key: str) -> None:
        if not api_key:
            raise ValueError("APIKeyGuard needs a non-empty key")
        self.app = app
        self._key = api_key.encode()

    def _allowed(self, scope: _Scope) -> bool:
        given = [v for k, v in scope.get("headers") or [] if k.lower() == b"x-api-key"]
        return len(given) == 1 and hmac.compare_digest(given[0], self._key)

    async def __call__(self, scope: _Scope, receive: Any, send: Any) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket") or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        if kind == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps(
            {"detail": "missing or wrong API key: send the server's key as X-API-Key (a member's api_key)"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'APIKey header="X-API-Key"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
