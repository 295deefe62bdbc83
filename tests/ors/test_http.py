"""`ormix.ors._http`, the one HTTP layer, against real ORS servers on loopback (through a real TCP proxy where
a connection must fail on purpose): how far a failed request got (`HTTPFailure`), keep-alive reuse seen
through aiohttp's tracing, the fresh-connection path, read timeouts, loops, and clients dropped unclosed."""

from __future__ import annotations

import gc
import logging
import pickle
import socket
import time
import uuid

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ormix._targets import parse_target
from ormix.ors import Endpoint, ORSClient, run_sync
from ormix.ors._endpoint import is_url, normalize_url
from ormix.ors._http import (
    HTTPClient,
    HTTPFailure,
    encode_json,
    error_name,
    is_tls,
)
from ormix.server import serve_in_process
from support.plain_http import blocking_request
from support.tcp_proxy import TCPProxy


@pytest.fixture(scope="module")
def faulty():
    with serve_in_process(["local:faulty"]) as srv:
        yield srv


def run(fn, *args):
    return anyio.run(fn, *args)


async def _open(http: HTTPClient, url: str) -> str:
    sid = str(uuid.uuid4())
    r = await http.request(
        "POST",
        f"{url}/create",
        json={"env_name": "faulty", "split": "test", "index": 0},
        headers={"X-Session-ID": sid},
    )
    assert r.status_code == 200, r.text
    return sid


def test_answers_of_any_status_are_returned_with_their_reuse(faulty):
    async def main():
        async with HTTPClient() as http:
            first = await http.request("GET", f"{faulty.url}/health")
            second = await http.request("POST", f"{faulty.url}/faulty/num_tasks", json={"split": "nope"})
            assert (first.status_code, first.json(), first.reused) == (200, {"status": "ok"}, False)
            assert second.status_code == 400 and second.reused  # an answer, not an exception
            assert "Invalid split" in second.text
            fresh = await http.request("GET", f"{faulty.url}/health", fresh=True)
            assert fresh.status_code == 200 and not fresh.reused

    run(main)


def test_failures_say_how_far_the_request_got(faulty):
    async def main():
        with TCPProxy(faulty.port) as proxy:
            async with HTTPClient() as http:
                sid = await _open(http, proxy.url)  # the connection is now warm
                ping = {"headers": {"X-Session-ID": sid}}
                proxy.cut_next(b"POST /ping", mode="before_request")
                with pytest.raises(HTTPFailure) as ei:
                    await http.request("POST", f"{proxy.url}/ping", **ping)
                assert ei.value.kind == "no-response" and ei.value.label == "NoResponse"
                assert ei.value.reused and ei.value.idle_race and not ei.value.unsent

                proxy.cut_next(b"POST /ping", mode="before_request")
                with pytest.raises(HTTPFailure) as ei:
                    await http.request("POST", f"{proxy.url}/ping", fresh=True, **ping)
                assert ei.value.kind == "no-response"
                assert not ei.value.reused and not ei.value.idle_race

                proxy.cut_next(b"POST /faulty/call", mode="after_task_id")
                seen: list[str] = []
                with pytest.raises(HTTPFailure) as ei:
                    await http.stream(
                        "POST",
                        f"{proxy.url}/faulty/call",
                        on_text=seen.append,
                        json={"name": "slow", "input": {"seconds": 0.3}},
                        **ping,
                    )
                assert ei.value.kind == "cut" and ei.value.answered and not ei.value.idle_race
                assert "event: task_id" in "".join(seen)  # what arrived was handed out before the cut
                assert [c["mode"] for c in proxy.cut_log] == [
                    "before_request",
                    "before_request",
                    "after_task_id",
                ]
                assert [c["requests_before"] for c in proxy.cut_log][:2] == [1, 0]

    run(main)


@pytest.mark.parametrize(
    ("kind", "unsent", "retryable", "label"),
    [
        ("connect", True, True, "ConnectFailed"),
        ("certificate", True, False, "CertificateError"),
        ("no-response", False, True, "NoResponse"),
        ("cut", False, True, "ResponseCut"),
        ("read-timeout", False, True, "ReadTimeout"),
        ("bad-response", False, True, "BadResponse"),
    ],
)
def test_each_kind_says_whether_to_send_again_and_survives_pickling(kind, unsent, retryable, label):
    e = HTTPFailure("gone", kind=kind, reused=True, answered=kind in ("cut", "bad-response"))
    assert (e.unsent, e.retryable, e.label, error_name(e)) == (unsent, retryable, label, label)
    assert e.idle_race == (kind == "no-response")  # only a reused connection closed before any answer
    assert not isinstance(e, TimeoutError)
    assert repr(e) == f"{label}('gone')"  # what messages quoting `{e!r}` printed before
    back = pickle.loads(pickle.dumps(e))
    assert (str(back), back.kind, back.reused, back.answered) == ("gone", kind, True, e.answered)


def test_connect_failures_are_unsent():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()

    async def main():
        async with HTTPClient(connect_timeout_s=2) as http:
            with pytest.raises(HTTPFailure) as ei:
                await http.request("GET", f"http://127.0.0.1:{port}/health")
            assert ei.value.kind == "connect" and ei.value.label == "ConnectFailed"
            assert ei.value.unsent and ei.value.retryable and not ei.value.answered

    run(main)


def test_read_timeout_bounds_silence_and_is_no_deadline(faulty):
    async def main():
        async with HTTPClient() as http:
            sid = await _open(http, faulty.url)
            with pytest.raises(HTTPFailure) as ei:
                await http.stream(
                    "POST",
                    f"{faulty.url}/faulty/call",
                    on_text=lambda _t: None,
                    json={"name": "slow", "input": {"seconds": 2.0}},
                    headers={"X-Session-ID": sid},
                    read_timeout_s=0.3,
                )
            assert ei.value.kind == "read-timeout" and ei.value.label == "ReadTimeout"
            assert ei.value.answered  # the head and the task_id came; then silence
            assert not isinstance(ei.value, TimeoutError)  # never mistaken for the caller's deadline

    run(main)


def test_stateless_request_caught_by_the_idle_race_is_resent_on_a_fresh_connection(faulty):
    async def main():
        with TCPProxy(faulty.port) as proxy:
            async with ORSClient(proxy.url, env_name="faulty", retries=0, ping_interval_s=None) as c:
                assert await c.num_tasks("train") == 36
                proxy.cut_next(b"POST /faulty/num_tasks", mode="before_request")
                assert await c.num_tasks("train") == 36  # retries=0: the resend is not a retry
                assert proxy.cut_log == [{"mode": "before_request", "requests_before": 1}]
                assert proxy.connections == 2

    run(main)


def test_one_client_serves_loop_after_loop(faulty):
    http = HTTPClient()

    async def health():
        return (await http.request("GET", f"{faulty.url}/health")).json()

    assert run(health) == {"status": "ok"}
    assert run(health) == {"status": "ok"}  # another loop: new connections; the old loop's are closed
    run(http.aclose)


def test_a_client_dropped_unclosed_closes_its_connections_on_its_loop(faulty, caplog):
    caplog.set_level(logging.DEBUG, logger="asyncio")

    async def use_and_drop() -> None:
        http = HTTPClient()
        assert (await http.request("GET", f"{faulty.url}/health")).status_code == 200

    with TCPProxy(faulty.port) as proxy:
        proxy_url = faulty.url.replace(str(faulty.port), str(proxy.port))

        async def through_proxy() -> None:
            http = HTTPClient()
            assert (await http.request("GET", f"{proxy_url}/health")).status_code == 200

        run_sync(use_and_drop)
        run_sync(through_proxy)  # on the portal's loop, dropped there
        assert proxy.connections == 1
        gc.collect()  # the finalizer schedules the close on the portal's loop
        for _ in range(250):  # up to 5 s for the close to reach the proxy
            if not proxy.open_connections():
                break
            time.sleep(0.02)
        assert proxy.open_connections() == 0  # the dropped client's connection was closed
    gc.collect()
    assert not [r for r in caplog.records if "Unclosed" in r.getMessage()]


def test_blocking_request_runs_from_plain_code_and_from_inside_a_loop(faulty):
    assert blocking_request("GET", f"{faulty.url}/health").json() == {"status": "ok"}

    async def inside() -> int:
        return blocking_request("GET", f"{faulty.url}/health").status_code

    assert run(inside) == 200


def test_request_bodies_are_compact_utf8_strict_json():
    assert encode_json({"text": "é漢", "n": [1, 2]}) == '{"text":"é漢","n":[1,2]}'
    with pytest.raises(ValueError):
        encode_json({"x": float("nan")})


_scheme = st.sampled_from(["http", "https"]).flatmap(
    lambda s: st.tuples(*[st.sampled_from([c, c.upper()]) for c in s]).map("".join)
)


@settings(max_examples=100, deadline=None)
@given(scheme=_scheme, port=st.integers(1, 65535), slash=st.booleans())
def test_schemes_compare_case_insensitively_everywhere(scheme, port, slash):
    url = f"{scheme}://127.0.0.1:{port}{'/' if slash else ''}"
    canonical = f"{scheme.lower()}://127.0.0.1:{port}"
    assert is_url(url) and is_tls(url) == (scheme.lower() == "https")
    assert normalize_url(url) == canonical
    assert parse_target(url).kind == "url"  # the target keeps the user's spelling; the endpoint normalizes
    assert Endpoint.for_url(url, "echo").session_url == canonical
    assert ORSClient(url, env_name="echo").endpoint.api_url == canonical
