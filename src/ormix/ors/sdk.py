"""Sessions through the openreward SDK instead of ormix's own client (`transport="sdk"`).

For a server or platform feature ormix's client does not handle yet, a member can open its sessions with
the SDK's async client. The session object has the same surface as `ormix.ors.Session` (`id`,
`prompt_text`, `tools`, `call`, `close`) and SDK errors are mapped onto ormix's typed errors, so episodes,
outcomes and telemetry behave the same. What the SDK lacks stays lacking on this path: no per-call deadline
beyond `timeout_s` enforced here, its own retry policy, its own keepalive.

Stateless calls (task lists, tool lists) still go through ormix's client.

Example:
    >>> import anyio
    >>> from ormix.local import serve_in_thread
    >>> async def reward(url):
    ...     conn = SdkConnection(url, env_name="echo")
    ...     session = await conn.open_session(split="train", index=0)
    ...     try:
    ...         return (await session.call("echo", {"text": "apple"})).reward
    ...     finally:
    ...         await session.close()
    ...         await conn.aclose()
    >>> with serve_in_thread(["local:echo"]) as srv:
    ...     anyio.run(reward, srv.url)
    1.0
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from typing import Any

import anyio

from ormix.ors import errors
from ormix.ors.models import GroupScore, ToolResult, ToolSpec, text_of


def _dump(block: Any) -> dict:
    import dataclasses

    if hasattr(block, "model_dump"):
        return block.model_dump()
    if dataclasses.is_dataclass(block) and not isinstance(block, type):
        return dataclasses.asdict(block)
    return dict(block)


def _block(block: dict[str, Any]) -> Any:
    """A wire block as the SDK's client reads one (by attribute); a tool result's own blocks too."""
    from types import SimpleNamespace

    fields = dict(block)
    if isinstance(fields.get("blocks"), list):
        fields["blocks"] = [_block(b) for b in fields["blocks"]]
    return SimpleNamespace(**{"type": "text", "detail": None, **fields})


def _map_error(exc: BaseException, *, env: str, sid: str | None, tool: str | None = None) -> errors.ORSError:
    """The ormix error for an SDK (or aiohttp) exception."""
    from openreward.api import errors as sdk

    ctx = {"env": env, "session_id": sid, "tool": tool}
    if isinstance(exc, sdk.ToolCallError):
        return errors.ToolRejected(
            f"tool call {tool!r} rejected ({exc.reason}): {exc.detail}",
            reason=str(exc.reason),
            detail=exc.detail,
            **ctx,
        )
    if isinstance(exc, sdk.ToolFailed):
        return errors.ToolFailed(f"tool {tool!r} failed in the environment: {exc}", detail=str(exc), **ctx)
    if isinstance(exc, sdk.SessionTerminatedError):
        return errors.SessionDeadError(f"session is dead (SDK: {exc.reason}). Open a new session.", **ctx)
    if isinstance(exc, TimeoutError):
        return errors.DeadlineExceeded(f"SDK call {tool or ''} did not finish in time", **ctx)
    return errors.TransportError(f"SDK transport failed: {type(exc).__name__}: {exc}", **ctx)


class SdkSession:
    """One ORS session opened through the SDK, with `ormix.ors.Session`'s surface."""

    def __init__(self, sdk_session: Any, env_name: str, timeout_s: float | None) -> None:
        self._s = sdk_session
        self.env_name = env_name
        self.timeout_s = timeout_s
        self.closed = False
        self.timings: dict[str, float] = {}

    @property
    def id(self) -> str | None:
        return self._s.sid

    async def _run(self, coro, tool: str | None = None):
        try:
            with anyio.fail_after(self.timeout_s or None):
                return await coro
        except errors.ORSError:
            raise
        except Exception as e:  # noqa: BLE001 - every SDK failure becomes a typed ormix error
            raise _map_error(e, env=self.env_name, sid=self.id, tool=tool) from e

    async def prompt(self) -> list[dict]:
        """The task's prompt blocks."""
        return [_dump(b) for b in await self._run(self._s.get_prompt())]

    async def prompt_text(self) -> str:
        """The task's prompt as text."""
        return text_of(await self.prompt())

    async def tools(self) -> list[ToolSpec]:
        """Shared and task tools of this session."""
        specs = await self._run(self._s.list_tools())
        return [
            ToolSpec(name=s.name, description=s.description or "", input_schema=s.input_schema or {})
            for s in specs
        ]

    async def call(self, name: str, input: dict, *, timeout_s: float | None = None) -> ToolResult:
        """Call a tool; SDK errors come back as ormix's typed errors."""
        t0 = time.perf_counter()
        out = await self._run(self._s.call_tool(name, input), tool=name)
        self.timings["last_call_ms"] = (time.perf_counter() - t0) * 1000
        return ToolResult(
            blocks=[_dump(b) for b in out.blocks or []],
            metadata=out.metadata if isinstance(out.metadata, dict) else None,
            reward=out.reward,
            finished=bool(out.finished),
        )

    async def supports_score_group(self, *, timeout_s: float | None = None) -> bool:
        """Whether the environment scores groups (the SDK reads ``supports_score_group`` from ``/tools``)."""
        return bool(await self._run(self._s.supports_score_group()))

    async def score_group(self, candidates: Any, *, timeout_s: float | None = None) -> list[GroupScore]:
        """Score a group through the SDK's ``session.score_group``; its errors become ormix's
        (`ScoreGroupUnsupported`, `ScoreGroupFailed`), candidates and scores are ormix's shapes."""
        from openreward.api import errors as sdk_errors
        from openreward.api.environments.types import GroupCandidate, Message

        sdk_candidates = [
            GroupCandidate(
                messages=[
                    Message(role=m["role"], blocks=[_block(b) for b in m.get("blocks") or []])
                    for m in (c["messages"] if isinstance(c, dict) else c)
                ],
                metadata=c.get("metadata") if isinstance(c, dict) else None,
            )
            for c in candidates
        ]
        ctx = {"env": self.env_name, "session_id": self.id, "tool": "score_group"}
        try:
            scores = await self._run(self._s.score_group(sdk_candidates), tool="score_group")
        except errors.TransportError as e:
            cause = e.__cause__
            if isinstance(cause, sdk_errors.ScoreGroupUnsupported):
                raise errors.ScoreGroupUnsupported(
                    f"the environment does not score groups: {cause}", **ctx
                ) from e
            if isinstance(cause, sdk_errors.ScoreGroupFailed):
                raise errors.ScoreGroupFailed(
                    f"score_group raised inside the environment: {cause}", detail=str(cause), **ctx
                ) from e
            raise
        return [GroupScore(reward=float(s.reward), metadata=s.metadata) for s in scores]

    async def close(self) -> None:
        """Close the session (idempotent, never raises)."""
        if self.closed:
            return
        self.closed = True
        try:
            await self._s.__aexit__(None, None, None)
        except Exception:  # noqa: BLE001 - closing a dead session is not an error
            pass


class SdkConnection:
    """Opens sessions on one environment through the SDK's async client.

    Args:
        target: server URL or catalog name `owner/name`.
        env_name: environment name on the server (URL targets).
        api_key: OpenReward API key (catalog targets).
        timeout_s: deadline of each call.
        open_timeout_s: deadline of opening a session (the SDK rides out a backend that is still
            starting, for up to 600 s per request; this bounds the whole open). None: `timeout_s`.
    """

    def __init__(
        self,
        target: str,
        *,
        env_name: str | None = None,
        api_key: str | None = None,
        timeout_s: float | None = 300.0,
        open_timeout_s: float | None = None,
    ) -> None:
        self.target, self.env_name, self.timeout_s = target, env_name, timeout_s
        self.open_timeout_s = timeout_s if open_timeout_s is None else open_timeout_s
        self._api_key = api_key
        self._env: Any = None
        self._client: Any = None
        self._finalizer: weakref.finalize | None = None
        self._deleting = 0  # cleanups of cut opens in flight: `aclose()` waits for them
        self._opening: set[anyio.CancelScope] = set()  # opens in flight: `aclose()` cuts them

    def __repr__(self) -> str:
        return f"SdkConnection({self.target!r}, env_name={self.env_name!r})"

    async def aclose(self) -> None:
        """Close the SDK client's aiohttp sessions and connector (idempotent; a later use reconnects)."""
        # Closing the SDK's sessions under an open's cleanup would leave its platform session behind: a
        # Ctrl-C cancels an open without waiting for that cleanup, and an open still riding out a cold start
        # (which cannot succeed on a closed client) is cut here; both are waited for.
        with anyio.CancelScope(shield=True), anyio.move_on_after(30.0):
            while self._deleting or self._opening:
                for opening in list(self._opening):  # also one begun while this waits
                    opening.cancel()
                await anyio.sleep(0.01)
        client, self._client, self._env = self._client, None, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if client is not None:
            try:
                await client.environments.aclose()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass

    def _environment(self) -> Any:
        if self._env is None:
            os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
            from openreward import AsyncOpenReward

            if "://" in self.target:
                client = AsyncOpenReward(api_key=self._api_key or "", base_url=self.target)
                # A self-hosted server serves sessions itself, not on a `sessions.` host.
                client.session_base_url = self.target
                self._env = client.environments.get(self.env_name or "env", variant=self.env_name)
            else:
                client = AsyncOpenReward(api_key=self._api_key)
                self._env = client.environments.get(self.target)
            self._client = client
            # A connection dropped without `aclose` still closes the SDK's aiohttp sessions, on their loop
            # (else each prints "Unclosed client session" when it is collected).
            self._finalizer = weakref.finalize(
                self, _close_dropped_client, client, asyncio.get_running_loop()
            )
        return self._env

    async def open_session(
        self,
        *,
        split: str | None = None,
        index: int | None = None,
        task_spec: dict | None = None,
        secrets: dict[str, str] | None = None,
    ) -> SdkSession:
        """Open a session (split + index, or a task spec)."""
        env = self._environment()
        name = self.env_name or self.target
        try:
            if task_spec is not None:
                from openreward.api.environments.types import Task

                task = Task(
                    server_name=env.server,
                    environment_name=env.name,
                    task_spec=task_spec,
                    namespace=env.namespace,
                )
                sdk_session = env.session(task=task, secrets=secrets)
            else:
                sdk_session = env.session(split=split, index=index, secrets=secrets)
            opening = anyio.CancelScope()
            self._opening.add(opening)
            try:
                with opening, anyio.fail_after(self.open_timeout_s or None):
                    await sdk_session.__aenter__()
                if opening.cancelled_caught:
                    raise errors.ORSError("the connection was closed while the session opened", env=name)
            except BaseException:
                # The SDK's own `async with` never exits a session whose enter failed, so the platform
                # session from /create_session would be left behind: delete it here (shielded, bounded).
                self._deleting += 1
                try:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(30.0):
                        try:
                            await sdk_session.__aexit__(None, None, None)
                        except Exception:  # noqa: BLE001 - the open's own error is the one to report
                            pass
                finally:
                    self._deleting -= 1
                raise
            finally:
                self._opening.discard(opening)
        except TimeoutError as e:
            raise errors.SessionOpenError(
                f"opening a session through the SDK did not finish within {self.open_timeout_s:g} s (the SDK "
                f"was still waiting: a backend that keeps answering 503 X-Backend-State: starting, or a slow "
                f"setup). Allow longer (open_timeout_s) or check the environment's status.",
                env=name,
            ) from e
        except errors.ORSError:
            raise
        except Exception as e:  # noqa: BLE001
            mapped = _map_error(e, env=name, sid=None)
            if isinstance(mapped, errors.TransportError):
                mapped = errors.SessionOpenError(f"opening a session through the SDK failed: {e}", env=name)
            raise mapped from e
        return SdkSession(sdk_session, name, self.timeout_s)


def _close_dropped_client(client: Any, loop: asyncio.AbstractEventLoop) -> None:
    """Finalizer of an `SdkConnection` nobody closed: schedule the SDK client's close on its loop."""
    if loop.is_closed() or not loop.is_running():
        return  # nothing can run the close any more; the sockets go with the loop or the process
    try:
        asyncio.run_coroutine_threadsafe(client.environments.aclose(), loop)
    except RuntimeError:  # the loop closed meanwhile
        pass
