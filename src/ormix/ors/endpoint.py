"""Where an ORS environment lives: resolve a target string into hosts, env name and routing headers.

Accepted targets:
- a URL `http(s)://host[:port]` of a self-hosted ORS server (`env_name` optional: when None it is
  discovered once with `GET /list_environments`, taking the first). The scheme is case-insensitive
  (`HTTPS://host` is TLS) and is written lower-case in the resolved URLs;
- a catalog name `owner/name` on the OpenReward platform: sessions go to `OPENREWARD_SESSION_URL`
  (default `https://sessions.openreward.ai`, derived from `OPENREWARD_URL`) with the name in the
  `X-Deployment` header, the platform API is `OPENREWARD_API_URL` (default `https://api.openreward.ai`),
  and the key is `api_key=` or `OPENREWARD_API_KEY` (sent as `X-API-Key`).

The env name always goes in the request path when it is known, so a call costs one round trip (a bare
path is answered with a 308 redirect to the first environment).

Example:
    >>> ep = resolve_endpoint("http://127.0.0.1:8080/", env_name="echo")
    >>> ep.session_url, ep.env_name, ep.deployment
    ('http://127.0.0.1:8080', 'echo', None)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from urllib.parse import urlparse, urlsplit, urlunparse

from ormix.ors.errors import BadTargetError, ORSError, TransportError

__all__ = ["DEFAULT_BASE_URL", "Endpoint", "discover_env_name", "is_url", "normalize_url", "resolve_endpoint"]

DEFAULT_BASE_URL = "https://openreward.ai"
_CATALOG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_ACCEPTED = (
    "a URL 'http(s)://host:port' of an ORS server (with env_name=..., or the first environment "
    "it lists), or a catalog name 'owner/name' such as 'Eigent/SETA'"
)


@dataclass(frozen=True)
class Endpoint:
    """A resolved ORS target. `api_key` is never shown in the repr.

    `env_name` is the server-side environment name used in paths (None for a catalog target without a
    variant: the platform routes by `deployment`). `deployment` is the catalog name for platform targets.

    Example:
        >>> Endpoint("http://h:1", "http://h:1", "echo", None, api_key="secret")
        Endpoint(api_url='http://h:1', session_url='http://h:1', env_name='echo', deployment=None)
    """

    api_url: str
    session_url: str
    env_name: str | None
    deployment: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)

    @property
    def is_platform(self) -> bool:
        """True for a catalog target (the platform assigns session ids through `/create_session`)."""
        return self.deployment is not None

    @property
    def target(self) -> str:
        """What a user would write to reach this endpoint (for messages)."""
        return self.deployment or self.session_url

    def path(self, suffix: str) -> str:
        """Path of a per-environment endpoint, e.g. `/echo/call`."""
        return f"/{self.env_name}{suffix}" if self.env_name else suffix

    def headers(self) -> dict[str, str]:
        """Headers every request to this endpoint carries (without the session id)."""
        h = {"User-Agent": _user_agent()}
        if self.api_key:
            h["X-API-Key"] = self.api_key
        if self.deployment:
            h["X-Deployment"] = self.deployment
        return h


def _user_agent() -> str:
    # From the installed distribution: ors/ imports nothing of ormix outside ors/.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"ormix/{version('ormix')}"
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "ormix"


def _prepend_subdomain(url: str, sub: str) -> str:
    p = urlparse(url)
    return urlunparse(p._replace(netloc=f"{sub}.{p.netloc}"))


def is_url(target: object) -> bool:
    """True for an `http://` or `https://` URL with a host, whatever the case of its scheme.

    Example:
        >>> is_url("HTTPS://example.test"), is_url("http://127.0.0.1:8080/"), is_url("Eigent/SETA")
        (True, True, False)
    """
    if not isinstance(target, str):
        return False
    p = urlparse(target.strip())
    return p.scheme in ("http", "https") and bool(p.netloc)  # urlparse lower-cases the scheme


def normalize_url(url: str) -> str:
    """`url` with a lower-case scheme and no trailing `/` (the form every resolved endpoint uses).

    Example:
        >>> normalize_url("HTTPS://Example.test:8443/")
        'https://Example.test:8443'
    """
    url = url.strip().rstrip("/")
    scheme, sep, rest = url.partition("://")
    return f"{urlsplit(url).scheme}{sep}{rest}" if sep else url


def discover_env_name(url: str, *, api_key: str | None = None, timeout_s: float = 10.0) -> str:
    """The first environment a server lists (`GET /list_environments`), in a blocking call.

    Example:
        >>> from ormix.local import serve_in_thread
        >>> with serve_in_thread(["local:echo"]) as srv:
        ...     discover_env_name(srv.url)
        'echo'
    """
    from ormix.ors.http import HTTPFailure, blocking_request

    url = normalize_url(url)
    headers = {"User-Agent": _user_agent()}
    if api_key:
        headers["X-API-Key"] = api_key
    try:
        resp = blocking_request("GET", f"{url}/list_environments", headers=headers, timeout_s=timeout_s)
    except (HTTPFailure, TimeoutError) as e:
        raise TransportError(
            f"cannot reach the ORS server at {url} to discover its environments "
            f"({type(e).__name__}: {e}). Check the server is running, or pass env_name=."
        ) from e
    if resp.status_code != 200:
        raise ORSError(f"GET {url}/list_environments answered {resp.status_code}; pass env_name= explicitly")
    try:
        names = resp.json()
    except (ValueError, UnicodeDecodeError):
        names = None
    if not isinstance(names, list) or not names:
        raise ORSError(f"the ORS server at {url} lists no environments; pass env_name= explicitly")
    return str(names[0])


def resolve_endpoint(target: str, *, env_name: str | None = None, api_key: str | None = None) -> Endpoint:
    """Resolve a target (`http(s)://...` or catalog `owner/name`) into an `Endpoint`.

    For a URL without `env_name` this makes one request (`GET /list_environments`).

    Example:
        >>> resolve_endpoint("Eigent/SETA", api_key="k").deployment
        'Eigent/SETA'
    """
    if not isinstance(target, str) or not target.strip():
        raise BadTargetError(f"empty or non-string ORS target {target!r}; use {_ACCEPTED}")
    target = target.strip()
    if is_url(target):
        url = normalize_url(target)
        name = env_name or discover_env_name(url, api_key=api_key)
        return Endpoint(api_url=url, session_url=url, env_name=name.lower(), deployment=None, api_key=api_key)
    if _CATALOG.match(target):
        base = os.getenv("OPENREWARD_URL", DEFAULT_BASE_URL)
        api_url = normalize_url(os.getenv("OPENREWARD_API_URL") or _prepend_subdomain(base, "api"))
        session_url = normalize_url(
            os.getenv("OPENREWARD_SESSION_URL") or _prepend_subdomain(base, "sessions")
        )
        key = api_key or os.getenv("OPENREWARD_API_KEY") or None
        return Endpoint(
            api_url=api_url, session_url=session_url, env_name=env_name, deployment=target, api_key=key
        )
    hint = ""
    if target.startswith("local:") or (":" in target and "://" not in target):
        hint = (
            " (`local:NAME` and `module:Class` targets are served on loopback by ormix.local — "
            "OpenRewardSpec does that for you — and then reached by their URL)"
        )
    raise BadTargetError(f"cannot use {target!r} as an ORS target{hint}; use {_ACCEPTED}")
