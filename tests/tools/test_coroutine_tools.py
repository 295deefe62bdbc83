"""Coroutine tool methods (`ormix.rollout._coroutine_tools`): what TRL's async worker awaits is what the sync
trainer calls: same names, schemas, results and failures, on a real local ORS server."""

from __future__ import annotations

import asyncio
import inspect

from ormix import OpenRewardSpec
from ormix.rollout._coroutine_tools import AsyncEpisodeFactory
from ormix.rollout._episode import close_episode


def test_coroutine_tools_match_the_sync_ones_and_never_hold_the_loop():
    spec = OpenRewardSpec("local:echo", num_tasks=2, local_serve="thread")
    plain = spec.environment_factory()
    coro = AsyncEpisodeFactory(spec.environment_factory)()
    names = spec.episode_class.binding.method_names
    assert set(names) == {"echo", "submit"}
    for name in names:
        sync_method, async_method = getattr(plain, name), getattr(coro, name)
        assert not inspect.iscoroutinefunction(sync_method) and inspect.iscoroutinefunction(async_method)
        # What TRL renders the model's tool schema from (transformers' get_json_schema).
        assert inspect.signature(async_method) == inspect.signature(sync_method)
        assert async_method.__doc__ == sync_method.__doc__ and async_method.__name__ == name

    prompt = plain.reset(task_index=0)
    assert coro.reset(task_index=0) == prompt
    word = prompt.split("'")[1]

    async def calls():
        ticks = 0

        async def ticker():  # the loop keeps running while the calls wait on the server
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        task = asyncio.create_task(ticker())
        right = await coro.echo(text=word)
        during = ticks  # the ticker ran while the call waited (a call holding the loop leaves it at 0)
        try:
            await coro.submit(text=word, unknown=1)
        except TypeError as e:
            bad = str(e)
        task.cancel()
        return right, bad, during

    right, bad, ticks = asyncio.run(calls())
    assert right == plain.echo(text=word) == word
    try:
        plain.submit(text=word, unknown=1)
    except TypeError as e:
        assert str(e) == bad
    assert ticks >= 1
    assert (coro.reward, coro.outcome.kind, [c.tool for c in coro.calls]) == (1.0, "scored", ["echo"])
    assert (plain.reward, plain.outcome.kind) == (coro.reward, coro.outcome.kind)
    close_episode(plain)
    close_episode(coro)
