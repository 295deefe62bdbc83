"""Hostile or broken servers: what ormix does when the server misbehaves.

Each fault: what ormix does → what the user sees.

- `/tools`, `/num_tasks`, `/task`, `/task_range`, `/tasks`, `/splits`, `/prompt`, `/task_tools` answer a
  body that is not JSON, or JSON of the wrong shape: the body and its shape are checked before use →
  `ProtocolError` (a `ServerError`, so an infrastructure error) naming the endpoint, the env and an
  excerpt, with "check the URL, env_name and the server's version"; never a raw `JSONDecodeError`.
- SSE `end` event that is not JSON, of the wrong shape, or with a NaN reward: validated before building
  the `ToolResult` → `ProtocolError` naming the tool; the session stays usable. In an `Episode`: outcome
  `error` (kind `transport`), reward `None`, the model reads "Error: the environment sent an answer that
  could not be read."
- SSE stream that ends (cleanly or by a reset) without `end`: retried with the server's `task_id` (a
  replay, never a second run), then stops → `TransportError` within a second; in an `Episode`: outcome
  `error` (`transport`).
- `POST /{env}/call` answered 200 with a body that is not SSE (JSON or an HTML page: a proxy, a wrong URL
  prefix): the content type is checked when no `end` came → `ProtocolError` naming it, not retried (the
  tool may have run).
- an `error` event longer than the 64 K characters kept: the head of the text (where a traceback names
  the exception) is kept, not its last piece; it counts as no payload received.
- stream that sends only `: ping` comments, or nothing, past the deadline: the per-call deadline cancels
  the read and closes that connection → `DeadlineExceeded` at the deadline; the session stays usable; in
  an `Episode`: outcome `error` (`deadline`).
- 50 MB tool output (chunked, or one unchunked SSE line): at most `max_kept_chars` (client default 4 M; a
  spec passes 8x its `max_output_chars`) of string content kept, the rest counted; the SSE parser hands
  out huge lines in pieces → peak client memory of a few MB; `ToolResult.truncated`, `.full_chars`; the
  model sees the head and `[ormix: output truncated, K of N characters shown]`; `CallRecord.output_chars`
  = N, `.truncated`.
- 3000 tools, `$ref` loops, non-object schemas, code in names and descriptions: bound as data (no
  exec/eval anywhere in `src/ormix`), renamed and noted → a working `Episode` class in about a second;
  `spec.binding.notes` say what was approximated.
- a server that echoes request headers (X-Secrets, X-API-Key) into its errors: every secret value, the
  encoded header and the API key are scrubbed from each error (and its chain) → `[redacted]` in
  messages, details, reprs, tracebacks, call records and logs.

The broken server is `tests/hostile_server.py`, a FAKE on purpose (a correct server cannot send these
faults); the 50 MB chunked output also comes from the real openreward server (`local:faulty`, in a child
process so that memory measured here is the client's alone).
"""

from __future__ import annotations

import ast
import json
import logging
import pathlib
import pickle
import time
import traceback
import tracemalloc

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ormix
from ormix import OpenRewardSpec
from ormix.ors import (
    DeadlineExceeded,
    ORSClient,
    ORSError,
    ProtocolError,
    ServerError,
    SessionDeadError,
    SessionOpenError,
    ToolFailed,
    ToolRejected,
    TransportError,
    encode_secrets,
)
from ormix.ors._sse import PARTIAL, CallStream, SSEParser, unclip
from ormix.rollout._episode import ToolCallError, call_tool, close_episode
from ormix.server import serve_in_process, serve_in_thread
from ormix.workbench.envs.faulty import big_text as faulty_big_text
from support.envs import Blocks
from support.hostile_server import HostileServer, big_text, encode_event
from support.tools import tool_text


@pytest.fixture(scope="module")
def hostile():
    with HostileServer() as srv:
        yield srv


def run(fn, *args):
    return anyio.run(fn, *args)


def _assert_typed(e: BaseException, *words: str) -> None:
    assert isinstance(e, ORSError) and not isinstance(e, (json.JSONDecodeError, KeyError))
    for w in words:
        assert w in str(e), (w, str(e))


# ----------------------------------------------------------------------------- malformed JSON


@pytest.mark.parametrize("env", ["badjson", "wrongshape"])
def test_malformed_stateless_answers_raise_protocol_error(hostile, env):
    async def main():
        async with ORSClient(hostile.url, env_name=env, ping_interval_s=None) as c:
            calls = {
                "tools": c.tools(),
                "num_tasks": c.num_tasks("train"),
                "task": c.task("train", 0),
                "task_range": c.task_range("train", 0, 2),
                "tasks": c.tasks("train"),
                "splits": c.splits(),
            }
            for endpoint, coro in calls.items():
                with pytest.raises(ProtocolError) as ei:
                    await coro
                _assert_typed(ei.value, f"/{env}/{endpoint}", "GET /version", f"env={env}")
                assert isinstance(ei.value, ServerError) and ei.value.status_code == 200
            async with c.session(split="train", index=0) as s:
                if env == "badjson":
                    with pytest.raises(ProtocolError) as ei:
                        await s.prompt()
                    _assert_typed(ei.value, "/badjson/prompt", "not JSON", s.id)
                else:
                    with pytest.raises(ProtocolError) as ei:
                        await s.tools()
                    _assert_typed(ei.value, "task_tools", "`tools` list")
                assert (await s.call("ok")).text == "ok ran"  # the session is still usable

    run(main)


@pytest.mark.parametrize(
    ("tool", "words"), [("badend", "not JSON"), ("wrongend", "`blocks`"), ("nanreward", "finite number")]
)
def test_malformed_end_event_raises_protocol_error_and_session_survives(hostile, tool, words):
    async def main():
        async with (
            ORSClient(hostile.url, env_name="ok", ping_interval_s=None) as c,
            c.session(split="train", index=0) as s,
        ):
            with pytest.raises(ProtocolError) as ei:
                await s.call(tool, {})
            _assert_typed(ei.value, f"tool {tool!r}", words, "GET /version")
            assert ei.value.tool == tool and ei.value.session_id == s.id
            assert (await s.call("ok")).reward == 1.0

    run(main)


# ----------------------------------------------------------------------------- streams without `end`


def test_stream_ending_without_end_event_is_a_transport_error_not_a_hang(hostile):
    async def main():
        async with (
            ORSClient(hostile.url, env_name="ok", ping_interval_s=None, timeout_s=10) as c,
            c.session(split="train", index=0) as s,
        ):
            before = hostile.requests.get("/ok/call", 0)
            for tool in ("eof", "cut"):
                t = time.perf_counter()
                with pytest.raises(TransportError) as ei:
                    await s.call(tool, {})
                assert time.perf_counter() - t < 3.0
                _assert_typed(ei.value, f"{tool!r}")
            # Each was retried with the server's task_id (safe: a replay), then given up.
            assert hostile.requests["/ok/call"] - before == 2 * (c.retries + 1)
            assert (await s.call("ok")).text == "ok ran"

    run(main)


class NotAStream(HostileServer):
    """The hostile server, whose `/call` of tools `json` and `html` answers 200 with a plain body: what a
    proxy in between, or another app under a wrong URL prefix, sends back."""

    async def _call(self, env, tool, args, headers, writer):  # noqa: ANN001, ANN202 - the base's signature
        if tool == "json":
            return await self._json(writer, {"ok": True, "output": {"blocks": [], "reward": 1.0}})
        if tool == "html":
            return await self._send(writer, 200, "<html><body>Welcome</body></html>", "text/html")
        return await super()._call(env, tool, args, headers, writer)


def test_a_call_answered_with_a_body_that_is_not_sse_is_a_protocol_error_not_retried():
    async def main(srv):
        async with (
            ORSClient(srv.url, env_name="ok", ping_interval_s=None, timeout_s=10) as c,
            c.session(split="train", index=0) as s,
        ):
            for tool, ctype in (("json", "application/json"), ("html", "text/html")):
                before = srv.requests.get("/ok/call", 0)
                with pytest.raises(ProtocolError) as ei:
                    await s.call(tool, {})
                assert srv.requests["/ok/call"] - before == 1  # never sent again: the tool may have run
                _assert_typed(ei.value, f"{tool!r}", ctype, "not an SSE stream", "may have run", srv.url)
            assert (await s.call("ok")).text == "ok ran"

    with NotAStream() as srv:
        run(main, srv)


def test_a_long_error_event_keeps_its_head():
    text = "Traceback (most recent call last):\nValueError: the tool failed\n" + "x" * 200_000 + "\nlast line"
    wire = encode_event("task_id", "t1") + encode_event("error", text)
    for cut in (4096, 65_000, len(wire)):
        parser, stream = SSEParser(), CallStream(4_000_000)
        for i in range(0, len(wire), cut):
            for event, data in parser.feed(wire[i : i + cut]):
                stream.on_event(event, data)
        assert stream.done and stream.error is not None and stream.result is None
        assert stream.error == text[:65_536] + "…", cut
        assert stream.received == 0  # an error's pieces are no payload


@pytest.mark.parametrize("tool", ["pings", "stall"])
def test_stream_that_never_ends_hits_the_deadline(hostile, tool):
    async def main():
        async with (
            ORSClient(hostile.url, env_name="ok", ping_interval_s=None, timeout_s=0.6) as c,
            c.session(split="train", index=0) as s,
        ):
            t = time.perf_counter()
            with pytest.raises(DeadlineExceeded) as ei:
                await s.call(tool, {})
            took = time.perf_counter() - t
            assert 0.55 < took < 2.0, took
            _assert_typed(ei.value, "0.6s", "timeout_s")
            assert (await s.call("ok")).text == "ok ran"

    run(main)


def test_episode_turns_every_broken_answer_into_an_error_outcome(hostile):
    spec = OpenRewardSpec(
        hostile.url,
        env_name="ok",
        num_tasks=1,
        discover_task_tools=False,
        call_timeout_s=0.6,
        ping_interval_s=None,
        name="hostile",
    )
    methods = {b.wire_name: b.method_name for b in spec.binding.bindings}
    expected = {
        "badend": "transport",
        "wrongend": "transport",
        "nanreward": "transport",
        "eof": "transport",
        "cut": "transport",
        "pings": "deadline",
        "stall": "deadline",
    }
    factory = spec.environment_factory
    for tool, kind in expected.items():
        ep = factory()
        assert ep.reset(task_index=0) == "Task for ok."
        with pytest.raises(
            ToolCallError
        ) as failed:  # raised into TRL's loop, which shows it as {"error": ...}
            getattr(ep, methods[tool])(n=1)
        text = str(failed.value)
        assert len(text) < 200, text
        if tool in ("badend", "wrongend", "nanreward"):  # the server answered, but not in ORS
            assert text == "the environment sent an answer that could not be read."
        assert ep.outcome.kind == "error" and ep.outcome.error_kind == kind, (tool, ep.outcome)
        assert ep.reward is None and ep.outcome.reward is None
        assert ep.calls[-1].error == kind and tool in ep.calls[-1].detail
        close_episode(ep)


# ----------------------------------------------------------------------------- 50 MB outputs


@pytest.fixture(scope="module")
def faulty_proc():
    # A child process: tracemalloc here then sees the client's allocations only.
    with serve_in_process(["local:faulty"]) as srv:
        yield srv


def _peak_during(fn, *args):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        out = run(fn, *args)
        return out, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_fifty_megabytes_from_the_real_server_cost_a_few_megabytes(faulty_proc):
    n = 50_000_000

    async def main():
        async with (
            ORSClient(
                faulty_proc.url, env_name="faulty", ping_interval_s=None, max_kept_chars=1_000_000
            ) as c,
            c.session(split="test", index=0) as s,
        ):
            t = time.perf_counter()
            r = await s.call("big", {"n": n})
            return r, time.perf_counter() - t

    (r, took), peak = _peak_during(main)
    assert r.truncated and r.full_chars == n
    assert r.metadata == {"n": n} and r.reward is None  # the fields after the huge string survive
    assert 100_000 < len(r.text) <= 1_000_000
    assert r.text == faulty_big_text(len(r.text))  # the head, exact
    assert peak < 15_000_000, f"peak traced memory {peak / 1e6:.1f} MB for a 50 MB output"
    assert took < 20


def test_one_unchunked_twenty_megabyte_line_costs_a_few_megabytes(hostile):
    n = 20_000_000

    async def main():
        async with (
            ORSClient(hostile.url, env_name="ok", ping_interval_s=None, max_kept_chars=1_000_000) as c,
            c.session(split="train", index=0) as s,
        ):
            return await s.call("bigline", {"n": n})

    r, peak = _peak_during(main)
    assert r.truncated and r.full_chars == n + len("\nafter")
    assert r.text.endswith("\nafter") and r.blocks[0]["text"] == big_text(len(r.blocks[0]["text"]))
    assert r.metadata == {"n": n} and r.reward == 0.5 and r.finished
    assert peak < 15_000_000, (
        f"peak traced memory {peak / 1e6:.1f} MB (the hostile server runs in this process)"
    )


def test_episode_shows_the_head_and_records_the_full_size(hostile):
    n = 3_000_000
    spec = OpenRewardSpec(
        hostile.url,
        env_name="ok",
        num_tasks=1,
        discover_task_tools=False,
        max_output_chars=1000,
        ping_interval_s=None,
        name="big",
    )
    ep = spec.environment_factory()
    ep.reset(task_index=0)
    text = ep.big(n=n)
    assert text.endswith(f"\n[ormix: output truncated, 1000 of {n + 6} characters shown]")
    assert text.startswith(big_text(1000))
    rec = ep.calls[-1]
    assert rec.error is None and rec.truncated and rec.output_chars == n + 6 and rec.reward == 0.5
    assert ep.outcome.kind == "scored"
    small = ep.ok(n=1)
    assert small == "ok ran" and not ep.calls[-1].truncated and ep.calls[-1].output_chars == 6
    close_episode(ep)


# ----------------------------------------------------------------------------- hostile tool surfaces


def test_three_thousand_hostile_tools_bind_through_a_spec(hostile):
    t = time.perf_counter()
    spec = OpenRewardSpec(hostile.url, env_name="many", num_tasks=2, ping_interval_s=None, name="many")
    report = spec.binding  # shared tools plus the probe session's task tools, merged
    took = time.perf_counter() - t
    assert len(report.bindings) + len(report.skipped) == 3000
    assert len(report.bindings) >= 2990
    notes = " ".join(
        [
            *report.notes,
            *(n for b in report.bindings for n in b.notes),
            *(n for b in report.bindings for p in b.params for n in p.notes),
        ]
    )
    assert "not a JSON object" in notes and "single value" in notes and "exposed as method" in notes
    assert "(recursive)" in report.binding("tool_1").docstring  # the $ref loop, shown as a shape
    assert took < 15, took
    assert not list(pathlib.Path("/tmp").glob("ormix-pwned-*"))  # descriptions stayed text
    ep = spec.environment_factory()
    doc = getattr(type(ep), report.bindings[0].method_name).__doc__
    assert "__import__('os')" in doc  # shown to the model as data
    assert len(spec.train_dataset) == 2


def test_nothing_in_the_package_executes_text():
    # Builtins that run text, by name or through `builtins.`; loaders and consoles that run code. (A method
    # merely called `eval`, like torch's `model.eval()`, runs nothing; `re.compile` compiles our patterns.)
    builtins_ = {"exec", "eval", "compile", "__import__"}
    runners = {"exec_module", "run_code", "runsource", "run_path", "run_module"}
    root = pathlib.Path(ormix.__file__).parent
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in builtins_:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.id}")
            elif isinstance(node, ast.Attribute):
                owner = getattr(node.value, "id", "")
                if node.attr in runners or (node.attr in builtins_ and owner in ("builtins", "__builtins__")):
                    found.append(f"{path.relative_to(root)}:{node.lineno} {owner}.{node.attr}")
    # The one loader run: the installed openreward package's own `__init__`, deferred to first use (what
    # `import openreward` runs; `defer_sdk_namespace`).
    sdk_init = "server/_openreward_internals.py"
    assert [f for f in found if f.startswith(sdk_init) and f.endswith("loader.exec_module")], found
    found = [f for f in found if not (f.startswith(sdk_init) and f.endswith("loader.exec_module"))]
    assert not found, found
    assert len(list(root.rglob("*.py"))) > 30  # the walk did see the package


# ----------------------------------------------------------------------------- secrets in errors

SECRET = "sk-planted-secret-value-123"
API_KEY = "orx-planted-api-key-456"
SECRETS = {"OPENAI_API_KEY": SECRET}
SENSITIVE = (SECRET, API_KEY, encode_secrets(SECRETS))


def _texts(e: BaseException) -> list[str]:
    out = [str(e), repr(e), str(getattr(e, "detail", "")), "".join(traceback.format_exception(e))]
    again = pickle.loads(pickle.dumps(e))
    return out + [str(again), repr(again)]


def test_errors_never_carry_secrets_even_when_the_server_echoes_them(hostile, caplog):
    caplog.set_level(logging.DEBUG)
    provoked: dict[type, BaseException] = {}

    async def catch(coro) -> None:
        try:
            await coro
        except ORSError as e:
            provoked.setdefault(type(e), e)
            assert any("[redacted]" in t for t in _texts(e)) or type(e) in (
                DeadlineExceeded,
                TransportError,
            ), e
        else:
            raise AssertionError("no error")

    async def main():
        async with ORSClient(
            hostile.url, env_name="echo", api_key=API_KEY, ping_interval_s=None, timeout_s=0.5
        ) as c:
            await catch(c.tools())  # 418 quoting X-API-Key: ServerError
            await catch(c.num_tasks("train"))  # not JSON, quoting it: ProtocolError
            await catch(c.open_session(split="train", index=1, secrets=SECRETS))  # 500 quoting X-Secrets
            async with c.session(split="train", index=0, secrets=SECRETS) as s:
                await catch(s.call("reject", {}))
                await catch(s.call("raise", {}))
                await catch(s.call("echoend", {}))
                await catch(s.call("stall", {}))
                await catch(s.call("cut", {}))
                await catch(s.prompt())  # 404 "Active environment not found": SessionDeadError

    run(main)
    assert set(provoked) == {
        ServerError,
        ProtocolError,
        SessionOpenError,
        ToolRejected,
        ToolFailed,
        DeadlineExceeded,
        TransportError,
        SessionDeadError,
    }
    # The server did echo them: the scrubbing is what kept them out.
    assert any(h.get("x-secrets") == SENSITIVE[2] for h in hostile.headers_seen)
    for e in provoked.values():
        for text in _texts(e):
            for value in SENSITIVE:
                assert value not in text, (type(e).__name__, text[:300])
    # Through an episode: call records, the outcome and the logs stay clean too.
    spec = OpenRewardSpec(
        hostile.url,
        env_name="echo",
        num_tasks=1,
        discover_task_tools=False,
        api_key=API_KEY,
        secrets=SECRETS,
        ping_interval_s=None,
        name="echo",
    )
    spec.__dict__["tool_specs"] = []  # /echo/tools answers 418 on purpose; bind nothing
    spec.__dict__["task_specs"] = [(0, {}), (1, {})]
    ep = spec.environment_factory()
    ep.reset(task_index=1)  # the 500 quoting X-Secrets
    assert ep.outcome.kind == "error" and ep.outcome.error_kind == "session_open"
    for r in ("reject", "raise"):
        ep.reset(task_index=0)
        tool_text(call_tool, episode=ep, wire_name=r, arguments={})
        assert "[redacted]" in ep.calls[-1].detail
    blob = " ".join([repr(ep.calls), str(ep.error), ep.last_output, caplog.text])
    for value in SENSITIVE:
        assert value not in blob
    close_episode(ep)


# ----------------------------------------------------------------------------- pure logic


_texts_st = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=3000)


@settings(max_examples=150, deadline=None)
# A surrogate pair whose escapes arrive in two pieces, both dropped: one character, not two.
@example(
    texts=["\U00010000" * 19 + "\U0001d404\U0001d430\U0001d431"], meta="", cap=1, piece=1, ascii_only=True
)
@given(
    texts=st.lists(_texts_st, min_size=1, max_size=4),
    meta=_texts_st,
    cap=st.integers(1, 4000),
    piece=st.sampled_from([1, 5, 97, 4096]),
    ascii_only=st.booleans(),
)
def test_clipped_results_parse_keep_exact_heads_and_count_the_rest(texts, meta, cap, piece, ascii_only):
    payload = json.dumps(
        {
            "ok": True,
            "output": {
                "blocks": [{"type": "text", "text": t} for t in texts],
                "metadata": {"m": meta},
                "reward": 0.25,
                "finished": True,
            },
        },
        ensure_ascii=ascii_only,
    )
    s = CallStream(max_chars=cap)
    for i in range(0, len(payload), piece):
        s.on_event("end" if i + piece >= len(payload) else "chunk", payload[i : i + piece])
    assert s.done and s.received == len(payload)
    obj = json.loads(s.result)
    out = obj["output"]
    assert out["reward"] == 0.25 and out["finished"] is True
    dropped = 0
    for block, text in zip(out["blocks"], texts, strict=True):
        block, d = unclip(block)
        assert text.startswith(block["text"]) and len(block["text"]) + d == len(text)
        dropped += d
    if len(payload) <= cap:
        assert s.clip is None and obj == json.loads(payload)
    else:
        assert s.clip is not None and s.clip.kept <= len(payload) + 64 * (len(texts) + 3)


@settings(max_examples=100, deadline=None)
@given(
    data=st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), max_size=800
    ),
    spill=st.integers(16, 120),
    cut=st.integers(1, 300),
    sep=st.sampled_from(["\r\n", "\n"]),
)
def test_sse_parser_hands_out_huge_events_in_pieces_that_join_exactly(data, spill, cut, sep):
    wire = encode_event("task_id", "t") + ": ping" + sep + sep + encode_event("end", data, sep=sep)
    p = SSEParser(spill_chars=spill)
    got = []
    for i in range(0, len(wire), cut):
        got += p.feed(wire[i : i + cut])
    assert got[0] == ("task_id", "t") and got[-1][0] == "end"
    assert all(name == PARTIAL for name, _ in got[1:-1])
    assert "".join(d for _, d in got[1:]) == data
    assert all(len(d) <= spill + cut + 8 for _, d in got[1:])


# ----------------------------------------------------------------------------- text that is not a string


def test_a_text_block_whose_text_is_not_a_string_is_a_protocol_error_naming_where():
    async def probe(url):
        async with ORSClient(url, env_name="blocks") as client:
            async with client.session(split="train", index=0) as session:
                with pytest.raises(ProtocolError) as in_result:
                    await session.call("say", {"text": "x"})
                assert await session.prompt_text() == "say something"  # the session stays usable
            async with client.session(split="train", index=1) as session:
                with pytest.raises(ProtocolError) as in_prompt:
                    await session.prompt_text()
        return in_result.value, in_prompt.value

    with serve_in_thread([Blocks]) as srv:
        in_result, in_prompt = run(probe, srv.url)
    _assert_typed(in_result, "'say'", "block 0", "`text` is null")
    _assert_typed(in_prompt, "GET /prompt", "block 0", "`text` is null")
