"""Where an ORS environment lives: hosts, env name and routing headers, built from already-parsed parts.

The target grammar (catalog `owner/name`, URL, `local:NAME`, `module:Class`) is `ormix._targets`', and
only there: this layer imports nothing of ormix outside `ormix.ors`, so its callers hand it the parts.

- `Endpoint.for_url(url, env_name)`: a self-hosted ORS server. The scheme is case-insensitive
  (`HTTPS://host` is TLS) and is written lower-case; with `env_name=None` the client discovers the first
  environment the server lists (`GET /list_environments`) on first use.
- `Endpoint.for_catalog("owner/name")`: the OpenReward platform. Sessions go to `OPENREWARD_SESSION_URL`
  (default `https://sessions.openreward.ai`, derived from `OPENREWARD_URL`) with the name in the
  `X-Deployment` header, the platform API is `OPENREWARD_API_URL` (default `https://api.openreward.ai`),
  and the key is `api_key=` or `OPENREWARD_API_KEY` (sent as `X-API-Key`).

The env name always goes in the request path when it is known, so a call costs one round trip (a bare
path is answered with a 308 redirect to the first environment).

Example:
    >>> ep = Endpoint.for_url("HTTP://127.0.0.1:8080/", env_name="Echo")
    >>> ep.session_url, ep.env_name, ep.deployment
    ('http://127.0.0.1:8080', 'echo', None)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import urlparse, urlsplit, urlunparse

from ormix.ors._errors import BadTargetError

DEFAULT_BASE_URL = "https://openreward.ai"


@dataclass(frozen=True)
class Endpoint:
    """A resolved ORS target. `api_key` is never shown in the repr.

    `env_name` is the server-side environment name used in paths (None for a catalog target without a
    variant: the platform routes by `deployment`; None for a URL: not discovered yet). `deployment` is
    the catalog name for platform targets.

    Example:
        >>> Endpoint("http://h:1", "http://h:1", "echo", None, api_key="secret")
        Endpoint(api_url='http://h:1', session_url='http://h:1', env_name='echo', deployment=None)
    """

    api_url: str
    session_url: str
    env_name: str | None
    deployment: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def for_url(cls, url: str, env_name: str | None = None, api_key: str | None = None) -> Endpoint:
        """A self-hosted server at `url` (`BadTargetError` when it is not an `http(s)://` URL)."""
        if not is_url(url):
            raise BadTargetError(
                f"{url!r} is not an http(s):// URL of an ORS server; a catalog name 'owner/name' is "
                f"Endpoint.for_catalog(name), and `local:NAME` / `module:Class` targets are served on "
                f"loopback by ormix.server (OpenRewardSpec does that for you), then reached by their URL"
            )
        url = normalize_url(url)
        return cls(url, url, env_name.lower() if env_name else None, None, api_key=api_key)

    @classmethod
    def for_catalog(cls, name: str, env_name: str | None = None, api_key: str | None = None) -> Endpoint:
        """The platform's deployment `name` (an `owner/name` that `ormix._targets` has checked).

        Example:
            >>> Endpoint.for_catalog("Eigent/SETA").session_url
            'https://sessions.openreward.ai'
        """
        base = os.getenv("OPENREWARD_URL", DEFAULT_BASE_URL)
        api_url = normalize_url(os.getenv("OPENREWARD_API_URL") or _prepend_subdomain(base, "api"))
        session_url = normalize_url(
            os.getenv("OPENREWARD_SESSION_URL") or _prepend_subdomain(base, "sessions")
        )
        key = api_key or os.getenv("OPENREWARD_API_KEY") or None
        return cls(api_url, session_url, env_name, name, api_key=key)

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
