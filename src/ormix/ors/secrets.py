"""The `X-Secrets` header, encoded exactly as the openreward SDK encodes it.

Wire format (openreward `build_secrets_header`): base64 of the JSON `{key: {"value": v, "allowed_domains":
[...]}}`. A plain string value of a well-known key (`OPENAI_API_KEY`, ...) gets that key's domains; a
`(value, domains)` tuple gives them explicitly. With an API key, the SDK adds `api_key` and
`OPENREWARD_API_KEY` entries allowed to reach the platform hosts (`augment_secrets_with_api_key`).

One deliberate difference: the SDK raises for a plain string under a key it does not know; ormix sends it
with no allowed domains (a self-hosted server ignores domains; on the platform the value reaches the
environment but the sandbox egress proxy will not let it out). The test suite checks this module against
the installed SDK, so the two stay in lockstep.

Secret values never appear in reprs, logs or error messages: only key names do.

Example:
    >>> import base64, json
    >>> json.loads(base64.b64decode(encode_secrets({"OPENAI_API_KEY": "sk-x"})))
    {'OPENAI_API_KEY': {'value': 'sk-x', 'allowed_domains': ['api.openai.com']}}
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from urllib.parse import urlparse

__all__ = ["WELL_KNOWN_SECRETS", "augment_with_api_key", "encode_secrets"]

SecretValue = str | tuple[str, list[str]]

_GH = [
    "github.com",
    "api.github.com",
    "uploads.github.com",
    "objects.githubusercontent.com",
    "raw.githubusercontent.com",
]
_HF = ["api-inference.huggingface.co", "huggingface.co"]
_HF2 = ["huggingface.co", "api-inference.huggingface.co"]
_BASE: dict[str, list[str]] = {
    "OPENAI_API_KEY": ["api.openai.com"],
    "ANTHROPIC_API_KEY": ["api.anthropic.com"],
    "GEMINI_API_KEY": ["generativelanguage.googleapis.com"],
    "TAVILY_API_KEY": ["api.tavily.com"],
    "GOOGLE_API_KEY": ["generativelanguage.googleapis.com"],
    "COHERE_API_KEY": ["api.cohere.com"],
    "MISTRAL_API_KEY": ["api.mistral.ai"],
    "GROQ_API_KEY": ["api.groq.com"],
    "TOGETHER_API_KEY": ["api.together.xyz"],
    "REPLICATE_API_TOKEN": ["api.replicate.com"],
    "HUGGINGFACE_API_KEY": _HF,
    "HF_TOKEN": _HF2,
    "HUGGING_FACE_HUB_TOKEN": _HF2,
    "PERPLEXITY_API_KEY": ["api.perplexity.ai"],
    "FIREWORKS_API_KEY": ["api.fireworks.ai"],
    "DEEPSEEK_API_KEY": ["api.deepseek.com"],
    "KAGGLE_KEY": ["www.kaggle.com"],
    "KAGGLE_USERNAME": ["www.kaggle.com"],
    "KAGGLE_API_KEY": ["www.kaggle.com"],
    "E2B_API_KEY": ["api.e2b.app"],
    "MODAL_TOKEN_ID": ["api.modal.com"],
    "MODAL_TOKEN_SECRET": ["api.modal.com"],
    "DAYTONA_API_KEY": ["app.daytona.io"],
}
#: Key → allowed domains, as in openreward 0.1.167 (`openreward.api.sandboxes.secrets.WELL_KNOWN_SECRETS`):
#: the upper-case names, their lower-case variants, and `gh_auth_token`.
WELL_KNOWN_SECRETS: dict[str, list[str]] = {
    **{k: list(v) for k, v in _BASE.items()},
    **{k.lower(): list(v) for k, v in _BASE.items()},
    "gh_auth_token": list(_GH),
}

# First-party services the api_key may reach from a sandbox (env-overridable, as in the SDK).
_SERVICE_URLS = [
    ("OPENREWARD_WEB_SEARCH_URL", "https://search.openreward.ai/search"),
    ("OPENREWARD_WEB_FETCH_URL", "https://search.openreward.ai/fetch"),
]


def _internal_domain(host: str) -> str | None:
    parts = host.split(".")
    return f"{parts[0]}.openreward.internal" if len(parts) >= 3 else None


def augment_with_api_key(
    secrets: Mapping[str, SecretValue] | None,
    api_key: str | None,
    session_url: str | None,
    api_url: str | None,
) -> dict[str, SecretValue] | None:
    """Add the `api_key` / `OPENREWARD_API_KEY` entries the SDK adds when it has an API key.

    Example:
        >>> sorted(augment_with_api_key({}, "k", "https://sessions.openreward.ai", None))
        ['OPENREWARD_API_KEY', 'api_key']
    """
    if api_key is None:
        return dict(secrets) if secrets else None
    domains: list[str] = []
    for url in (session_url, api_url):
        host = urlparse(url).hostname if url else None
        if host:
            domains.append(host)
    for var, default in _SERVICE_URLS:
        host = urlparse(os.getenv(var, default)).hostname
        if host and host not in domains:
            domains.append(host)
    domains.extend(d for h in list(domains) if (d := _internal_domain(h)) is not None)
    out: dict[str, SecretValue] = dict(secrets) if secrets else {}
    out["api_key"] = (api_key, domains)
    out["OPENREWARD_API_KEY"] = (api_key, domains)
    return out


def encode_secrets(secrets: Mapping[str, SecretValue]) -> str:
    """Encode secrets for the `X-Secrets` header (base64 of JSON, as the openreward SDK does).

    Example:
        >>> encode_secrets({}) == base64.b64encode(b"{}").decode()
        True
    """
    payload: dict[str, dict[str, object]] = {}
    for key, entry in secrets.items():
        if not isinstance(key, str):
            raise TypeError(f"secret names must be strings, got a {type(key).__name__} key")
        if isinstance(entry, tuple):
            value, domains = entry
            payload[key] = {"value": value, "allowed_domains": domains}
        elif isinstance(entry, str):
            payload[key] = {"value": entry, "allowed_domains": WELL_KNOWN_SECRETS.get(key, [])}
        else:
            # Never echo the value: only its key and type.
            raise TypeError(
                f"secret {key!r} must be a string or a (value, allowed_domains) tuple, "
                f"got {type(entry).__name__}"
            )
    return base64.b64encode(json.dumps(payload).encode()).decode()
