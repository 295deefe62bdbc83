"""A real loopback TCP proxy that can cut connections on purpose (for dropped-connection tests).

Not a fake: bytes go through real sockets between the client and a real ORS server. Arm a cut with
`cut_next(match, mode)`:
- `mode="after_task_id"`: forward the request, forward the response until it holds a complete
  `event: task_id` SSE event, then close both sides (the server keeps running the tool);
- `mode="before_request"`: close the client's connection without forwarding the request (what a server
  closing an idle keep-alive connection just as the request arrives looks like to the client);
- `mode="after_request"`: forward the request, and when the server's first response bytes come back,
  close both sides without passing any of them on (the server read the request and runs the tool; the
  client gets no response byte: a server that died mid-request, or a middlebox that dropped it).
`drop_all()` closes every open connection at once (a server closing idle keep-alive connections).

`requests` lists the request lines seen (`"POST /echo/call"`), `connections` counts accepted client
connections, and `cut_log` records each cut with how many requests its connection had carried before
(`0`: a fresh connection).

Example:
    >>> with TCPProxy(upstream_port=8080) as proxy:        # doctest: +SKIP
    ...     proxy.cut_next(b"/call", mode="after_task_id")
    ...     url = proxy.url
"""

from __future__ import annotations

import re
import socket
import threading

_TASK_ID_EVENT = re.compile(rb"event: task_id\r?\ndata: [^\r\n]+\r?\n\r?\n")
_REQUEST_LINE = re.compile(rb"(GET|POST|PUT|DELETE|HEAD|PATCH) (/\S*) HTTP/1\.[01]\r\n")
MODES = ("after_task_id", "before_request", "after_request")


class TCPProxy:
    """A loopback TCP proxy to `upstream_port` that can cut connections on purpose (see the module)."""

    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.upstream = (host, upstream_port)
        self._listener = socket.create_server((host, 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self._lock = threading.Lock()
        self._armed: list[tuple[bytes, str]] = []
        self.cuts = 0
        self.connections = 0
        self.requests: list[str] = []
        self.cut_log: list[dict] = []
        self._open = 0
        self._closed = False
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept_loop, daemon=True, name="tcp-proxy-accept").start()

    def cut_next(self, match: bytes, mode: str = "after_task_id") -> None:
        """Cut the next request whose bytes contain `match` (one cut per call)."""
        assert mode in MODES
        with self._lock:
            self._armed.append((match, mode))

    def open_connections(self) -> int:
        """Client connections the client has not closed yet (and the proxy has not cut)."""
        with self._lock:
            return self._open

    def _take(self, data: bytes) -> str | None:
        with self._lock:
            for i, (match, mode) in enumerate(self._armed):
                if match in data:
                    del self._armed[i]
                    return mode
        return None

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._socks += [client, upstream]
            self._open += 1
        state = {"cut_mode": None, "resp": b"", "dead": False, "requests": 0}
        cond = threading.Lock()

        def kill() -> None:
            with cond:
                if state["dead"]:
                    return
                state["dead"] = True
            self.cuts += 1
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

        def client_to_server() -> None:
            try:
                while True:
                    data = client.recv(65536)
                    if not data:
                        break
                    lines = [f"{m.decode()} {p.decode()}" for m, p in _REQUEST_LINE.findall(data)]
                    mode = self._take(data)
                    if mode is not None:
                        with self._lock:
                            self.cut_log.append({"mode": mode, "requests_before": state["requests"]})
                    state["requests"] += len(lines)
                    with self._lock:
                        self.requests += lines
                    if mode == "before_request":
                        kill()
                        return
                    if mode is not None:
                        state["cut_mode"] = mode
                        state["resp"] = b""
                    upstream.sendall(data)
            except OSError:
                pass
            finally:
                with self._lock:
                    self._open -= 1
                if not state["dead"]:
                    try:
                        upstream.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass

        def server_to_client() -> None:
            try:
                while True:
                    data = upstream.recv(65536)
                    if not data:
                        break
                    if state["cut_mode"] == "after_request":
                        kill()
                        return
                    client.sendall(data)
                    if state["cut_mode"] == "after_task_id":
                        state["resp"] += data
                        if _TASK_ID_EVENT.search(state["resp"]):
                            kill()
                            return
            except OSError:
                pass
            finally:
                if not state["dead"]:
                    try:
                        client.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass

        threading.Thread(target=client_to_server, daemon=True).start()
        server_to_client()

    def drop_all(self) -> None:
        """Close every open connection now, as a server does with idle keep-alive connections."""
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._socks:
            try:
                s.close()
            except OSError:
                pass

    def __enter__(self) -> TCPProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
