"""Run the async ORS client from plain threads: one anyio `BlockingPortal` per process.

TRL's tool loop and its thread pools call tools synchronously; they reach the async client through
`run_sync`. The portal (an event loop on a daemon thread) is created on first use, recreated in a child
after `fork` (the parent's loop thread does not exist there), and stopped at interpreter exit.

Create `ORSClient`s and open sessions *through* the portal (inside the coroutine you pass to
`run_sync`), so their HTTP connections live on the portal's loop.

Background work (the keepalive pings of sessions) runs in the portal's **service task group**, an anyio
task group opened for the life of the portal (`service_task_group()`); it is cancelled when the portal
stops. Nothing in `ormix.ors` starts a free-floating task.

The one place that uses asyncio directly is `run_sync`'s hop onto the loop: one `call_soon_threadsafe`, a
task the calling thread waits for on a plain lock, nothing else. That is several times cheaper per call
than `BlockingPortal.call` (which adds a task group, cancel scopes and a future per call) and it matters
for throughput: TRL makes every tool call through it. The task it creates is never left running on its
own: the calling thread waits for it, and cancels it if the wait is interrupted. Doing this is the
bridge's job, and only the bridge's; the portal's loop is asyncio (anyio's asyncio backend) by
construction, because aiohttp, ormix's HTTP library, runs on asyncio.

`run_in_new_loop` runs a coroutine function on a private, short-lived loop, from any thread (even one
whose own loop is running): for rare blocking calls such as endpoint discovery and readiness probes.

Example:
    >>> import anyio
    >>> async def add(a, b):
    ...     await anyio.sleep(0)
    ...     return a + b
    >>> run_sync(add, 1, 2)
    3
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import anyio.abc
from anyio.from_thread import BlockingPortal

__all__ = [
    "at_portal_stop",
    "on_portal_thread",
    "portal",
    "portal_loop",
    "run_in_new_loop",
    "run_sync",
    "service_task_group",
    "shutdown",
]

T = TypeVar("T")

_lock = threading.Lock()
_state: dict[str, Any] = {"pid": None, "portal": None, "thread": None, "loop": None, "service": None}


def _reset_after_fork() -> None:
    # The child inherits the parent's state but not its loop thread; start over lazily. The parent's
    # portal object is plain data here (no finalizer), so dropping it cannot block the child.
    global _lock
    _lock = threading.Lock()
    _state.update(pid=None, portal=None, thread=None, loop=None, service=None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _start() -> tuple[BlockingPortal, threading.Thread]:
    # A hand-rolled start_blocking_portal: its generator-based context manager would, when finalized in
    # a forked child, try to stop the parent's (absent) loop thread and hang.
    ready = threading.Event()
    box: dict[str, Any] = {}

    def runner() -> None:
        async def main() -> None:
            async with BlockingPortal() as p, anyio.create_task_group() as service:
                box["portal"] = p
                box["service"] = service
                box["loop"] = asyncio.get_running_loop()
                ready.set()
                await p.sleep_until_stopped()
                service.cancel_scope.cancel()

        try:
            anyio.run(main, backend="asyncio")
        except BaseException as e:  # reported to the starting thread
            box["error"] = e
            ready.set()

    thread = threading.Thread(target=runner, name="ormix-ors-portal", daemon=True)
    thread.start()
    ready.wait()
    if "error" in box:
        raise RuntimeError(f"could not start the ormix ORS portal: {box['error']!r}") from box["error"]
    _state["loop"] = box["loop"]
    _state["service"] = box["service"]
    return box["portal"], thread


def portal() -> BlockingPortal:
    """This process's portal (an asyncio loop on a daemon thread), started on first use.

    Example:
        >>> portal().call(lambda: 42)
        42
    """
    pid = os.getpid()
    p = _state["portal"]
    if p is not None and _state["pid"] == pid:
        return p
    with _lock:
        if _state["portal"] is None or _state["pid"] != pid:
            p, thread = _start()
            _state.update(pid=pid, portal=p, thread=thread)
        return _state["portal"]


def on_portal_thread() -> bool:
    """True when the caller runs on this process's portal loop (never starts the portal).

    Example:
        >>> on_portal_thread()
        False
        >>> async def where():
        ...     return on_portal_thread()
        >>> run_sync(where)
        True
    """
    thread = _state["thread"]
    return thread is not None and _state["pid"] == os.getpid() and thread.ident == threading.get_ident()


def service_task_group() -> anyio.abc.TaskGroup:
    """The portal's process-wide task group for background tasks (keepalive pings).

    Call it on the portal's loop only (inside a coroutine run by `run_sync`); start tasks with
    `start_soon`. They are cancelled when the portal stops. Raises RuntimeError elsewhere: a task group
    belongs to its loop.

    Example:
        >>> async def spawn():
        ...     done = anyio.Event()
        ...     async def background():
        ...         done.set()
        ...     service_task_group().start_soon(background)
        ...     await done.wait()
        ...     return done.is_set()
        >>> run_sync(spawn)
        True
    """
    if not on_portal_thread():
        raise RuntimeError("service_task_group() is for the portal's own loop; call it through run_sync")
    return _state["service"]


def run_in_new_loop(async_fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run `async_fn(*args)` to completion on a new event loop of its own and return its result.

    Works from any thread: where no loop runs, in this thread; where one does (the portal's, a test's),
    in a helper thread that this call waits for, so that loop is blocked meanwhile. For rare, short
    blocking calls (endpoint discovery, readiness probes), not for the hot path (use `run_sync`).

    Example:
        >>> async def add(a, b):
        ...     return a + b
        >>> run_in_new_loop(add, 2, 3)
        5
        >>> async def nested():  # from inside a running loop: a helper thread runs it
        ...     return run_in_new_loop(add, 1, 1)
        >>> run_sync(nested)
        2
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(async_fn, *args, backend="asyncio")
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = anyio.run(async_fn, *args, backend="asyncio")
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = e

    thread = threading.Thread(target=target, name="ormix-ors-oneshot", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box.pop("error")
    return box["result"]


def run_sync(async_fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Call `async_fn(*args, **kwargs)` on the portal's loop and wait for the result (from any thread).

    Must not be called from the portal's own loop (it would deadlock): that raises RuntimeError. If the
    waiting thread is interrupted (KeyboardInterrupt), the task on the loop is cancelled.

    Example:
        >>> import anyio
        >>> run_sync(anyio.sleep, 0)
    """
    portal()
    loop: asyncio.AbstractEventLoop = _state["loop"]
    if asyncio._get_running_loop() is loop:
        raise RuntimeError(
            "ormix.ors.run_sync was called from the portal's own event loop; await the "
            "coroutine directly instead"
        )
    # The lightest hop onto the loop and back: one call_soon_threadsafe, a task, and a plain lock the
    # caller blocks on (asyncio.run_coroutine_threadsafe adds a wrapper future, a condition variable
    # and chained callbacks per call; BlockingPortal.call adds a task group and cancel scopes).
    done = threading.Lock()
    done.acquire()
    box: list[Any] = [None, None, None]  # result, exception, task

    def finish(task: asyncio.Future) -> None:
        if task.cancelled():
            box[1] = concurrent.futures.CancelledError()
        else:
            exc = task.exception()
            if exc is None:
                box[0] = task.result()
            else:
                box[1] = exc
        done.release()

    def start() -> None:
        try:
            aw = async_fn(*args, **kwargs)
            task = loop.create_task(aw) if asyncio.iscoroutine(aw) else asyncio.ensure_future(aw)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box[1] = e
            done.release()
            return
        box[2] = task
        task.add_done_callback(finish)

    loop.call_soon_threadsafe(start)
    try:
        done.acquire()
    except BaseException:
        loop.call_soon_threadsafe(_cancel, box)
        raise
    exc = box[1]
    if exc is not None:
        try:
            raise exc
        finally:
            box[:] = (None, None, None)  # no reference cycle through the traceback
    return box[0]


def _cancel(box: list[Any]) -> None:
    task = box[2]
    if task is not None:
        task.cancel()


_STOP_HOOKS: list[Callable[[], Awaitable[None]]] = []


def at_portal_stop(hook: Callable[[], Awaitable[None]]) -> None:
    """Run `await hook()` on the portal's loop when the portal stops (`shutdown()`, interpreter exit),
    before its tasks are cancelled: for closing connections that live on that loop. Each hook once.

    Example:
        >>> async def tidy():
        ...     pass
        >>> at_portal_stop(tidy)
    """
    if hook not in _STOP_HOOKS:
        _STOP_HOOKS.append(hook)


async def _run_stop_hooks() -> None:
    for hook in list(_STOP_HOOKS):
        try:
            with anyio.fail_after(5):
                await hook()
        except Exception:  # noqa: BLE001 - best effort: the portal stops anyway
            pass


def portal_loop() -> asyncio.AbstractEventLoop | None:
    """The portal's event loop when this process has a portal running, else None (never starts one).

    Example:
        >>> portal_loop() is None or portal_loop().is_running()
        True
    """
    loop = _state["loop"]
    return loop if _state["portal"] is not None and _state["pid"] == os.getpid() else None


def shutdown() -> None:
    """Stop the portal of this process (also registered at exit). A later `portal()` starts a new one.

    The `at_portal_stop` hooks run first, on the portal's loop.
    """
    with _lock:
        p, thread, pid = _state["portal"], _state["thread"], _state["pid"]
        _state.update(pid=None, portal=None, thread=None, service=None)
    if p is not None and pid == os.getpid():
        try:
            p.call(_run_stop_hooks)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
        try:
            p.call(p.stop, True)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
        thread.join(timeout=5)


atexit.register(shutdown)
