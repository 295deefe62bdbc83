"""The ORS protocol client: endpoints, sessions, typed errors, and a sync bridge for plain threads.

Imports neither TRL nor datasets.

Example:
    >>> from ormix.ors import ORSClient, run_sync
    >>> async def first_prompt(url):                            # doctest: +SKIP
    ...     async with ORSClient(url, env_name="echo") as c, c.session(split="train", index=0) as s:
    ...         return await s.prompt_text()
    >>> run_sync(first_prompt, "http://127.0.0.1:8080")        # doctest: +SKIP
"""

from __future__ import annotations

from ormix.ors.bridge import portal, run_sync
from ormix.ors.client import ORSClient
from ormix.ors.endpoint import Endpoint, resolve_endpoint
from ormix.ors.errors import (
    BadTargetError,
    DeadlineExceeded,
    ORSError,
    ProtocolError,
    ServerError,
    SessionDeadError,
    SessionOpenError,
    ToolFailed,
    ToolRejected,
    TransportError,
)
from ormix.ors.models import Split, ToolResult, ToolSpec, text_of
from ormix.ors.secrets import encode_secrets
from ormix.ors.session import Session

__all__ = [
    "BadTargetError",
    "DeadlineExceeded",
    "Endpoint",
    "ORSClient",
    "ORSError",
    "ProtocolError",
    "ServerError",
    "Session",
    "SessionDeadError",
    "SessionOpenError",
    "Split",
    "ToolFailed",
    "ToolRejected",
    "ToolResult",
    "ToolSpec",
    "TransportError",
    "encode_secrets",
    "portal",
    "resolve_endpoint",
    "run_sync",
    "text_of",
]
