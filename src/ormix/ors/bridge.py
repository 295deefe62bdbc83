"""Run the async ORS client from plain threads: one anyio `BlockingPortal` per process.

TRL's tool loop and its thread pools call tools synchronously; they reach the async client through
`run_sync`. The portal (an event loop on a daemon thread) is created on first use, recreated in a child
after `fork` (the parent's loop thread does not exist there), and stopped at interpreter exit.

Create `ORSClient`s and open sessions *through* the portal (inside the coroutine you pass to
`run_sync`), so their HTTP connections live on the portal's loop.

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
from anyio.from_thread import BlockingPortal

__all__ = ["portal", "run_sync", "shutdown"]

T = TypeVar("T")

_lock = threading.Lock()
_state: dict[str, Any] = {"pid": None, "portal": None, "thread": None, "loop": None}


def _reset_after_fork() -> None:
    # The child inherits the parent's state but not its loop thread; start over lazily. The parent's
    # portal object is plain data here (no finalizer), so dropping it cannot block the child.
    global _lock
    _lock = threading.Lock()
    _state.update(pid=None, portal=None, thread=None, loop=None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _start() -> tuple[BlockingPortal, threading.Thread]:
    # A hand-rolled start_blocking_portal: its generator-based context manager would, when finalized in
    # a forked child, try to stop the parent's (absent) loop thread and hang.
    ready = threading.Event()
    box: dict[str, Any] = {}

    def runner() -> None:
        async def main() -> None:
            async with BlockingPortal() as p:
                box["portal"] = p
                box["loop"] = asyncio.get_running_loop()
                ready.set()
                await p.sleep_until_stopped()

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


def shutdown() -> None:
    """Stop the portal of this process (also registered at exit). A later `portal()` starts a new one."""
    with _lock:
        p, thread, pid = _state["portal"], _state["thread"], _state["pid"]
        _state.update(pid=None, portal=None, thread=None)
    if p is not None and pid == os.getpid():
        try:
            p.call(p.stop, True)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
        thread.join(timeout=5)


atexit.register(shutdown)
