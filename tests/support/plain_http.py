"""Plain HTTP requests for tests: ormix's own `HTTPClient` on a private short-lived loop, from any thread."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ormix.ors._bridge import run_in_new_loop
from ormix.ors._http import HTTPClient, Response


def blocking_request(
    method: str,
    url: str,
    *,
    json: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 10.0,
) -> Response:
    """One request from synchronous code, on a private short-lived loop (`ormix.ors._bridge.run_in_new_loop`),
    through ormix's own `HTTPClient`; raises `HTTPFailure`, or `TimeoutError` after `timeout_s`.

    Example:
        >>> from ormix.server import serve_in_thread
        >>> with serve_in_thread(["local:echo"]) as srv:
        ...     blocking_request("GET", srv.url + "/health").json()
        {'status': 'ok'}
    """
    import anyio

    async def once() -> Response:
        async with HTTPClient(connect_timeout_s=timeout_s) as http:
            with anyio.fail_after(timeout_s):
                return await http.request(method, url, json=json, headers=headers)

    return run_in_new_loop(once)
