"""The ORS protocol client: endpoints, sessions, typed errors, and a sync bridge for plain threads.

Every HTTP request goes through `ormix.ors._http` (aiohttp). Imports nothing of ormix outside
`ormix.ors`, and neither TRL nor datasets.

Example:
    >>> from ormix.server import serve_in_thread
    >>> from ormix.ors import ORSClient, run_sync
    >>> async def first_prompt(url):
    ...     async with ORSClient(url, env_name="echo") as c, c.session(split="train", index=0) as s:
    ...         return await s.prompt_text()
    >>> with serve_in_thread(["local:echo"]) as srv:             # any ORS server's URL will do
    ...     run_sync(first_prompt, srv.url)
    "Call the echo tool with the word 'apple'."
"""

from __future__ import annotations

from ormix.ors._bridge import portal, run_sync
from ormix.ors._client import DEFAULT_MAX_KEPT_CHARS, ORSClient
from ormix.ors._endpoint import Endpoint
from ormix.ors._errors import (
    BadTargetError,
    DeadlineExceeded,
    ORSError,
    ProtocolError,
    ScoreGroupFailed,
    ScoreGroupUnsupported,
    ServerError,
    SessionDeadError,
    SessionOpenError,
    ToolFailed,
    ToolRejected,
    TransportError,
)
from ormix.ors._models import GroupScore, Split, ToolResult, ToolSpec, text_of
from ormix.ors._pool import PooledSession, ServerPool
from ormix.ors._secrets import encode_secrets
from ormix.ors._session import Session

__all__ = [
    "DEFAULT_MAX_KEPT_CHARS",
    "BadTargetError",
    "DeadlineExceeded",
    "Endpoint",
    "GroupScore",
    "ORSClient",
    "ORSError",
    "PooledSession",
    "ProtocolError",
    "ScoreGroupFailed",
    "ScoreGroupUnsupported",
    "ServerError",
    "ServerPool",
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
    "run_sync",
    "text_of",
]
