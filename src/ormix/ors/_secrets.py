"""The `X-Secrets` header: the openreward SDK's `build_secrets_header`, with one difference.

Wire format: base64 of the JSON `{key: {"value": v, "allowed_domains": [...]}}`. A plain string under a
well-known key (`OPENAI_API_KEY`, ...) gets that key's domains; a `(value, domains)` tuple gives them.

The difference: the SDK raises for a plain string under a key it does not know; ormix sends it with no
allowed domains (a self-hosted server ignores domains; on the platform the value reaches the environment
but the sandbox egress proxy will not let it out). Secret values never appear in reprs, logs or error
messages: only key names do.

The SDK is imported on first use (importing it takes seconds): `import ormix.ors` stays light.

Example:
    >>> import base64, json
    >>> header = encode_secrets({"OPENAI_API_KEY": "sk-x", "MY_TOKEN": "t"})
    >>> {k: v["allowed_domains"] for k, v in json.loads(base64.b64decode(header)).items()}
    {'OPENAI_API_KEY': ['api.openai.com'], 'MY_TOKEN': []}
"""

from __future__ import annotations

from collections.abc import Mapping

SecretValue = str | tuple[str, list[str]]


def encode_secrets(secrets: Mapping[str, SecretValue]) -> str:
    """Encode secrets for the `X-Secrets` header; `TypeError` (naming the key, never the value) for a
    value that is neither a string nor a `(value, allowed_domains)` tuple."""
    from openreward.api.sandboxes.secrets import WELL_KNOWN_SECRETS, build_secrets_header

    entries: dict[str, SecretValue] = {}
    for key, entry in secrets.items():
        if not isinstance(key, str):
            raise TypeError(f"secret names must be strings, got a {type(key).__name__} key")
        if not isinstance(entry, (str, tuple)):
            raise TypeError(
                f"secret {key!r} must be a string or a (value, allowed_domains) tuple, "
                f"got {type(entry).__name__}"
            )
        entries[key] = (entry, []) if isinstance(entry, str) and key not in WELL_KNOWN_SECRETS else entry
    return build_secrets_header(entries)
