"""The HTTP/1.1 response parser of `ormix.ors.h1`, checked against h11 (the reference sans-IO HTTP/1.1
implementation httpx itself builds on) on generated responses fed in arbitrary pieces, plus the
malformed inputs it must refuse. Pure logic: no sockets here (the connection is tested against real
servers in test_ors_client.py and test_ors_faults.py)."""

from __future__ import annotations

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ormix.ors.h1 import H1Pool, H1Session, Headers, ProtocolViolation, ResponseParser

_token = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12).filter(
    lambda s: s not in {"content-length", "transfer-encoding", "connection"}
)
_value = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789 ;=/,.", min_size=1, max_size=20).map(
    lambda s: s.strip() or "v"
)


@st.composite
def responses(draw):
    status = draw(st.sampled_from([200, 201, 204, 304, 400, 404, 410, 500, 503]))
    no_body = status in (204, 304)
    framing = "none" if no_body else draw(st.sampled_from(["length", "chunked", "close"]))
    body = b"" if no_body else draw(st.binary(max_size=300))
    close = framing == "close" or draw(st.booleans())
    headers = draw(st.lists(st.tuples(_token, _value), max_size=4))
    interim = "".join(
        f"HTTP/1.1 {draw(st.sampled_from([100, 103]))} Interim\r\nx-interim: 1\r\n\r\n"
        for _ in range(draw(st.integers(0, 2)))
    )
    head_lines = [f"{interim}HTTP/1.1 {status} Reason Words"] + [f"{k}: {v}" for k, v in headers]
    if close and framing != "close":
        head_lines.append("Connection: close")
    if framing == "length" or no_body and draw(st.booleans()):
        head_lines.append(f"Content-Length: {len(body)}")
        wire_body = body
    elif framing == "chunked":
        head_lines.append("Transfer-Encoding: chunked")
        sizes = draw(st.lists(st.integers(1, 64), max_size=8))
        parts, pos = [], 0
        for n in sizes:
            piece = body[pos : pos + n]
            if not piece:
                break
            ext = draw(st.sampled_from(["", ";name=value", ";x"]))
            parts.append(f"{len(piece):x}{ext}\r\n".encode() + piece + b"\r\n")
            pos += len(piece)
        if pos < len(body):
            parts.append(f"{len(body) - pos:X}\r\n".encode() + body[pos:] + b"\r\n")
        trailers = draw(st.sampled_from([b"", b"x-trailer: t\r\n"]))
        wire_body = b"".join(parts) + b"0\r\n" + trailers + b"\r\n"
    else:
        wire_body = body
    wire = "\r\n".join(head_lines).encode() + b"\r\n\r\n" + wire_body
    return wire, framing, status, headers, body


def _h11_parse(wire: bytes, eof: bool) -> tuple[int, dict[str, str], bytes, bool]:
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(wire)
    if eof:
        conn.receive_data(b"")
    status, headers, body = 0, {}, b""
    while True:
        ev = conn.next_event()
        if isinstance(ev, h11.Response):
            status = ev.status_code
            for k, v in ev.headers:
                key = k.decode()
                headers[key] = f"{headers[key]}, {v.decode()}" if key in headers else v.decode()
        elif isinstance(ev, h11.Data):
            body += ev.data
        elif isinstance(ev, h11.EndOfMessage):
            return status, headers, body, conn.their_state is h11.DONE
        elif ev is h11.NEED_DATA or ev is h11.PAUSED:
            raise AssertionError(f"h11 did not finish: {ev}")


def _cut(wire: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(wire) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points + [len(wire)]:
        pieces.append(wire[last:p])
        last = p
    return [p for p in pieces if p]


@settings(max_examples=300, deadline=None)
@given(resp=responses(), cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=12))
def test_parser_agrees_with_h11_for_any_split(resp, cuts):
    wire, framing, status, headers, body = resp
    eof = framing == "close"
    want_status, want_headers, want_body, want_keep = _h11_parse(wire, eof)
    p = ResponseParser()
    p.start()
    got = b""
    for piece in _cut(wire, cuts):
        assert not p.done
        p.feed(piece)
        got += p.take()
    if eof:
        assert not p.done  # a close-delimited body ends only with the connection
        p.feed_eof()
    assert p.done and p.head_done
    assert (p.status, dict(p.headers), got) == (want_status, want_headers, want_body)
    assert got == body
    # h11 reports a close-delimited answer as DONE before it sees the close; it is never reusable.
    want_keep = want_keep and not eof
    assert p.keep_alive == want_keep
    assert p.idle == want_keep  # a clean keep-alive answer leaves the connection ready for the next


def test_back_to_back_responses_on_one_connection():
    p = ResponseParser()
    for i in range(3):
        p.start()
        p.feed(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n" + str(i).encode())
        assert p.done and p.take() == str(i).encode() and p.idle


def test_head_request_and_304_have_no_body():
    p = ResponseParser()
    p.start(head_request=True)
    p.feed(b"HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n")
    assert p.done and p.take() == b"" and p.idle
    p.start()
    p.feed(b"HTTP/1.1 304 Not Modified\r\ncontent-length: 99\r\n\r\n")
    assert p.done and p.idle


def test_connection_not_reusable_after_stray_bytes_or_http10():
    p = ResponseParser()
    p.start()
    p.feed(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nxJUNK")
    assert p.done and p.take() == b"x" and not p.idle
    p = ResponseParser()
    p.start()
    p.feed(b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n")
    assert p.done and not p.keep_alive  # like h11: no HTTP/1.0 keep-alive


def test_chunked_with_content_length_is_read_but_not_reused():
    # Both framings at once is a request-smuggling shape (RFC 9112 6.3): honour chunked, drop the socket.
    p = ResponseParser()
    p.start()
    p.feed(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n")
    assert p.done and p.take() == b"ab" and not p.idle


def test_non_chunked_transfer_encoding_reads_until_close():
    p = ResponseParser()
    p.start()
    p.feed(b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\nabc")
    assert not p.done
    p.feed_eof()
    assert p.done and p.take() == b"abc" and not p.idle


@pytest.mark.parametrize(
    "wire",
    [
        b"HTTP/2 200 OK\r\n\r\n",
        b"HTTP/1.1 20 OK\r\n\r\n",
        b"SMTP 200 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nbad name : x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx: 1\r\n folded\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 1, 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabXY",
        b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
    ],
    ids=lambda w: w[:48].decode(errors="replace"),
)
def test_malformed_responses_are_refused(wire):
    p = ResponseParser()
    p.start()
    with pytest.raises(ProtocolViolation):
        p.feed(wire)


def test_oversized_head_is_refused():
    p = ResponseParser()
    p.start()
    with pytest.raises(ProtocolViolation, match="64 KiB"):
        p.feed(b"HTTP/1.1 200 OK\r\n" + b"x-big: " + b"a" * 70_000)


def test_start_refuses_while_a_response_is_in_progress():
    p = ResponseParser()
    p.start()
    p.feed(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nab")
    with pytest.raises(RuntimeError, match="in progress"):
        p.start()


def test_headers_ignore_case():
    h = Headers({"x-backend-state": "starting"})
    assert h.get("X-Backend-State") == "starting" and "X-BACKEND-STATE" in h and h["x-Backend-state"]
    assert h.get("missing", "d") == "d" and 3 not in h


def test_request_encoding_keeps_a_path_prefix_and_refuses_header_injection():
    http = H1Session(H1Pool("http://127.0.0.1:8080/mounted", connect_timeout_s=1.0))
    wire = http._encode(
        "POST", "http://127.0.0.1:8080/mounted/echo/call", {"name": "é"}, {"X-Session-ID": "s"}
    )
    head, body = wire.split(b"\r\n\r\n")
    assert head.split(b"\r\n") == [
        b"POST /mounted/echo/call HTTP/1.1",
        b"Host: 127.0.0.1:8080",
        b"X-Session-ID: s",
        b"Content-Type: application/json",
        b"Content-Length: 13",
    ]
    assert body == '{"name":"é"}'.encode()
    assert http._encode("GET", "http://127.0.0.1:8080/x", None, None).endswith(
        b"Host: 127.0.0.1:8080\r\n\r\n"
    )
    assert b"Content-Length: 0" in http._encode("POST", "http://127.0.0.1:8080/ping", None, None)
    with pytest.raises(ValueError, match="line break"):
        http._encode("GET", "http://127.0.0.1:8080/x", None, {"X-Session-ID": "a\r\nX-Evil: 1"})
    with pytest.raises(ValueError, match="is not on"):
        http._encode("GET", "http://127.0.0.1:80800/x", None, None)
    with pytest.raises(ValueError, match="http://"):
        H1Pool("https://example.org", connect_timeout_s=1.0)
