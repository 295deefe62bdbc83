"""Server-sent events: an incremental, pure parser and the reassembly of an ORS `/call` stream.

The ORS server (sse-starlette) writes `event: NAME` and `data: TEXT` lines ended by `\\r\\n`, a blank line
per event, and `: ping` comments every 10 s. A large result comes as `chunk` events of 4096 characters
followed by `end`; the client joins them. Parsing follows the SSE spec: one space after the colon is
dropped (not all leading whitespace, which would corrupt a chunk that starts with spaces), data lines of
one event are joined with `\\n`, and `\\r\\n`, `\\r` and `\\n` all end a line, even when split across reads.

Example:
    >>> p = SSEParser()
    >>> p.feed("event: task_id\\r\\ndata: abc\\r\\n\\r\\n: ping\\r\\n\\r\\nevent: end\\r\\nda")
    [('task_id', 'abc')]
    >>> p.feed("ta: {}\\r\\n\\r\\n")
    [('end', '{}')]
"""

from __future__ import annotations

__all__ = ["CallStream", "SSEParser", "encode_event"]


class SSEParser:
    """Feed text as it arrives; get back complete `(event, data)` pairs. Comments are dropped.

    An event with no `event:` field is reported as `message` (SSE default) when it has data.
    """

    __slots__ = ("_buf", "_event", "_data", "_pending_cr")

    def __init__(self) -> None:
        self._buf = ""
        self._event: str | None = None
        self._data: list[str] = []
        self._pending_cr = False

    def feed(self, text: str) -> list[tuple[str, str]]:
        """Consume more text; return the events it completed."""
        if self._pending_cr:
            # The previous read ended in '\r': a '\n' now belongs to the same line ending.
            self._pending_cr = False
            if text.startswith("\n"):
                text = text[1:]
        buf = self._buf + text
        out: list[tuple[str, str]] = []
        pos = 0
        n = len(buf)
        while pos < n:
            i_n = buf.find("\n", pos)
            i_r = buf.find("\r", pos)
            if i_n < 0 and i_r < 0:
                break
            if i_r >= 0 and (i_n < 0 or i_r < i_n):
                end = i_r
                if end + 1 < n:
                    nxt = end + 2 if buf[end + 1] == "\n" else end + 1
                else:
                    nxt = end + 1
                    self._pending_cr = True
            else:
                end, nxt = i_n, i_n + 1
            self._line(buf[pos:end], out)
            pos = nxt
        self._buf = buf[pos:]
        return out

    def _line(self, line: str, out: list[tuple[str, str]]) -> None:
        if not line:
            if self._data or self._event:
                out.append((self._event or "message", "\n".join(self._data)))
            self._event = None
            self._data = []
            return
        if line[0] == ":":
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        # `id:` and `retry:` carry nothing ORS uses.


def encode_event(event: str, data: str, sep: str = "\r\n") -> str:
    """Encode one event the way sse-starlette does (for tests and fakes).

    Example:
        >>> encode_event("end", "a\\nb")
        'event: end\\r\\ndata: a\\r\\ndata: b\\r\\n\\r\\n'
    """
    lines = [f"event: {event}"] + [f"data: {d}" for d in data.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return sep.join(lines) + sep + sep


class CallStream:
    """Reassemble an ORS `/call` (or `/create_session`) stream from its events.

    After feeding, `task_id` holds the server's task id (once seen), `done` tells whether `end` or `error`
    arrived, and `result` / `error` hold the joined payload text or the error text.

    Example:
        >>> s = CallStream()
        >>> s.on_event("task_id", "t1"); s.on_event("chunk", '{"ok"'); s.on_event("end", ":true}")
        >>> s.task_id, s.done, s.result
        ('t1', True, '{"ok":true}')
    """

    __slots__ = ("task_id", "done", "result", "error", "_chunks")

    def __init__(self) -> None:
        self.task_id: str | None = None
        self.done = False
        self.result: str | None = None
        self.error: str | None = None
        self._chunks: list[str] = []

    def on_event(self, event: str, data: str) -> None:
        if event == "task_id":
            self.task_id = data.strip()
        elif event == "chunk":
            self._chunks.append(data)
        elif event == "end":
            self._chunks.append(data)
            self.result = "".join(self._chunks)
            self._chunks = []
            self.done = True
        elif event == "error":
            self.error = data
            self.done = True

    def reset_partial(self) -> None:
        """Drop chunks of an interrupted stream; a resumed stream sends the whole result again."""
        self._chunks = []
