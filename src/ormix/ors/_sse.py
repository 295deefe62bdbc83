"""Server-sent events: an incremental, pure parser and the reassembly of an ORS `/call` stream.

The ORS server (sse-starlette) writes `event: NAME` and `data: TEXT` lines ended by `\\r\\n`, a blank line
per event, and `: ping` comments every 10 s. A large result comes as `chunk` events of 4096 characters
followed by `end`; the client joins them. Parsing follows the SSE spec: one space after the colon is
dropped (not all leading whitespace, which would corrupt a chunk that starts with spaces), data lines of
one event are joined with `\\n`, and `\\r\\n`, `\\r` and `\\n` all end a line, even when split across reads.

Memory stays bounded whatever the server sends: the parser hands out the data of an event larger than
`spill_chars` in pieces (a `("", text)` pair, before the event itself), and `CallStream(max_chars=N)`
keeps a result larger than `N` characters as JSON whose long strings are cut (`ClippedJSON`), counting
what it dropped.

Example:
    >>> p = SSEParser()
    >>> p.feed("event: task_id\\r\\ndata: abc\\r\\n\\r\\n: ping\\r\\n\\r\\nevent: end\\r\\nda")
    [('task_id', 'abc')]
    >>> p.feed("ta: {}\\r\\n\\r\\n")
    [('end', '{}')]
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Event name of a piece of a large event's data, handed out before the event completes.
PARTIAL = ""
# A line that is not data (event name, comment, id) longer than this is dropped.
_MAX_OTHER_LINE = 4096


class SSEParser:
    """Feed text as it arrives; get back complete `(event, data)` pairs. Comments are dropped.

    An event with no `event:` field is reported as `message` (SSE default) when it has data. An event
    whose data grows past `spill_chars` (a server that does not chunk a huge result, or a hostile one)
    is handed out in pieces: `(PARTIAL, text)` pairs, then the event with the rest of its data; the
    pieces and the rest joined are the event's data. A non-data line longer than `spill_chars` is dropped.
    """

    __slots__ = ("_buf", "_event", "_parts", "_lines", "_size", "_pending_cr", "_spill", "_mid", "_cont")

    def __init__(self, spill_chars: int = 65_536) -> None:
        self._buf = ""
        self._event: str | None = None
        self._parts: list[str] = []  # the event's data so far, "\n" between lines included
        self._lines = 0  # data lines of the event so far (handed out or not)
        self._size = 0  # characters in _parts
        self._pending_cr = False
        self._spill = max(1, spill_chars)
        self._mid = 0  # the buffered line's head was handed out: 1 a data line, 2 a line being dropped
        self._cont = False  # the next data line continues one whose head was handed out

    def feed(self, text: str) -> list[tuple[str, str]]:
        """Consume more text; return the events it completed."""
        if self._pending_cr:
            # The previous read ended in '\r': a '\n' now belongs to the same line ending.
            self._pending_cr = False
            if text.startswith("\n"):
                text = text[1:]
        if self._mid:
            # The rest of a line whose head was handed out: "data: " keeps its text as is (one space is
            # dropped after the colon), ":" makes a dropped line a comment.
            text = ("data: " if self._mid == 1 else ":") + text
            self._mid = 0
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
        rest = buf[pos:] if pos else buf
        if len(rest) > self._spill and self._spill_line(rest, out):
            rest = ""
        self._buf = rest
        return out

    def _spill_line(self, line: str, out: list[tuple[str, str]]) -> bool:
        """Hand out the head of a long unfinished data line (True), drop a long other line (True), or
        keep buffering (False)."""
        name, sep, value = line.partition(":")
        if name == "data" and sep:
            self._data_line(value[1:] if value.startswith(" ") else value)
            if self._size:
                out.append((PARTIAL, "".join(self._parts)))
            self._parts = []
            self._size = 0
            self._mid = 1
            self._cont = True
            return True
        if len(line) > max(self._spill, _MAX_OTHER_LINE):
            self._mid = 2
            return True
        return False

    def _data_line(self, value: str) -> None:
        if self._cont:
            self._cont = False
        else:
            if self._lines:
                self._parts.append("\n")
                self._size += 1
            self._lines += 1
        self._parts.append(value)
        self._size += len(value)

    def _line(self, line: str, out: list[tuple[str, str]]) -> None:
        if not line:
            if self._lines or self._event:
                parts = self._parts
                out.append((self._event or "message", parts[0] if len(parts) == 1 else "".join(parts)))
            self._event = None
            self._parts = []
            self._lines = 0
            self._size = 0
            self._cont = False
            return
        if line[0] == ":":
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data_line(value)
            if self._size > self._spill:
                out.append((PARTIAL, "".join(self._parts)))
                self._parts = []
                self._size = 0
        # `id:` and `retry:` carry nothing ORS uses.


# Complete units of a JSON string's content: runs of plain characters and whole escapes.
_UNITS = re.compile(r'(?:[^"\\]+|\\u[0-9a-fA-F]{4}|\\[^u])*')


def _units_end(s: str, start: int, stop: int) -> int:
    # The pattern matches the empty string, so there is always a match.
    match = _UNITS.match(s, start, stop)
    return start if match is None else match.end()


# Appended (as JSON escapes) inside a string that was cut; `unclip` removes it and reads the count.
_MARK = "\\u0000ormix-clipped:{}\\u0000"
_MARK_RE = re.compile("\x00ormix-clipped:(\\d+)\x00\\Z")
#: Characters every string keeps even once the budget is spent (keys, block types, short values).
MIN_KEEP = 256
_SLICE = 16_384
_scanstring: Any = json.decoder.scanstring  # type: ignore[attr-defined]  # typeshed omits it


def _decoded(s: str, i: int, e: int) -> str:
    # s[i:e] is whole units of a JSON string: the text they decode to.
    try:
        return _scanstring(s[i:e] + '"', 0, False)[0]
    except ValueError:
        return s[i:e]


class ClippedJSON:
    """Reassemble a JSON text from pieces while keeping at most `budget` characters of string content in
    all (each string keeps at least `MIN_KEEP`), so memory stays bounded however large the text.

    A string that was cut gets a marker that `unclip` turns back into a count of dropped characters, so
    the result is still valid JSON with every key, number and the head of every string. When what is
    kept outside long strings passes `limit` characters, `overflow` is set and the text is dropped.

    Example:
        >>> c = ClippedJSON(budget=300, limit=10_000)
        >>> c.feed('{"text": "' + "x" * 1000); c.feed('", "reward": 1.0}')
        >>> obj, dropped = unclip(json.loads(c.finish()))
        >>> len(obj["text"]), obj["reward"], c.clipped, c.dropped   # the key "text" used 4 of the 300
        (296, 1.0, 1, 704)
    """

    __slots__ = (
        "_parts",
        "kept",
        "budget",
        "limit",
        "overflow",
        "clipped",
        "dropped",
        "_in_str",
        "_carry",
        "_left",
        "_cut",
        "_drop",
        "_high",
    )

    def __init__(self, budget: int, limit: int) -> None:
        self._parts: list[str] = []
        self.kept = 0
        self.budget = budget
        self.limit = limit
        self.overflow = False
        self.clipped = 0  # strings cut
        self.dropped = 0  # decoded characters dropped from them
        self._in_str = False
        self._carry = ""  # an escape split by a piece boundary
        self._left = 0  # raw characters the current string may still keep
        self._cut = False  # the current string is being dropped
        self._drop = 0  # decoded characters dropped from the current string
        self._high = False  # what was dropped last ends in the first half of a surrogate pair

    def _keep(self, text: str) -> None:
        if self.overflow:
            return
        self.kept += len(text)
        if self.kept > self.limit:
            self.overflow = True
            self._parts = []
            return
        self._parts.append(text)

    def feed(self, s: str) -> None:
        """Consume the next piece of the JSON text."""
        if len(s) > _SLICE:
            # The string-content regex keeps backtracking state per repetition: matching a huge piece
            # at once would cost memory in proportion to it. Slices bound that (escapes split by a
            # slice edge are carried over like those split by the network).
            for k in range(0, len(s), _SLICE):
                self._feed(s[k : k + _SLICE])
        else:
            self._feed(s)

    def _feed(self, s: str) -> None:
        if self._carry:
            s, self._carry = self._carry + s, ""
        i, n = 0, len(s)
        while i < n:
            if not self._in_str:
                j = s.find('"', i)
                if j < 0:
                    self._keep(s[i:] if i else s)
                    return
                self._keep(s[i : j + 1])
                i = j + 1
                self._in_str = True
                self._left = max(self.budget, MIN_KEEP)
                self._cut = False
                self._drop = 0
                self._high = False
                continue
            e = _units_end(s, i, len(s))
            if e > i:
                self._run(s, i, e)
            if e >= n:
                return
            if s[e] == '"':
                if self._cut:
                    self._keep(_MARK.format(self._drop))
                    self.clipped += 1
                    self.dropped += self._drop
                self._keep('"')
                self._in_str = False
                i = e + 1
            elif n - e < 6:
                self._carry = s[e:]
                return
            else:  # a malformed escape: kept, so that parsing the result reports it
                self._keep(s[e : e + 2])
                i = e + 2

    def _run(self, s: str, i: int, e: int) -> None:
        if not self._cut:
            left = self._left
            if e - i <= left:
                self._keep(s[i:e])
                self._left = left - (e - i)
                self.budget -= e - i
                return
            c = _units_end(s, i, i + left)  # the last whole unit that fits
            if c > i:
                self._keep(s[i:c])
                self.budget -= c - i
            self._cut = True
            i = c
        text = _decoded(s, i, e)
        if text:
            if self._high and "\udc00" <= text[0] <= "\udfff":
                self._drop -= 1  # a surrogate pair split between two pieces is one character
            self._high = "\ud800" <= text[-1] <= "\udbff"
            self._drop += len(text)

    def finish(self) -> str:
        """The kept JSON text (empty after an overflow)."""
        if self._carry:
            self._keep(self._carry)
            self._carry = ""
        parts, self._parts = self._parts, []
        return "".join(parts)


def unclip(obj: Any, _depth: int = 0) -> tuple[Any, int]:
    """Remove the cut markers `ClippedJSON` left in the strings of a parsed value.

    Returns the cleaned value and the characters dropped from its strings.

    Example:
        >>> unclip({"a": ["abc\\x00ormix-clipped:7\\x00"]})
        ({'a': ['abc']}, 7)
    """
    if isinstance(obj, str):
        m = _MARK_RE.search(obj)
        if m is None:
            return obj, 0
        head = obj[: m.start()]
        if head and "\ud800" <= head[-1] <= "\udbff":
            head = head[:-1]  # the cut fell between the halves of a surrogate pair
        return head, int(m.group(1))
    if _depth > 200:
        return obj, 0
    if isinstance(obj, list):
        total = 0
        out = []
        for v in obj:
            v, d = unclip(v, _depth + 1)
            out.append(v)
            total += d
        return out, total
    if isinstance(obj, dict):
        total = 0
        new = {}
        for k, v in obj.items():
            k, _ = unclip(k, _depth + 1)
            v, d = unclip(v, _depth + 1)
            new[k] = v
            total += d
        return new, total
    return obj, 0


#: What a `CallStream` keeps of an `error` event or a task id.
_ERROR_MAX = 65_536
_TASK_ID_MAX = 256
#: Characters of JSON structure (outside cut strings) a clipped result may hold beyond its budget.
STRUCTURE_ALLOWANCE = 4_000_000


class CallStream:
    """Reassemble an ORS `/call` (or `/create_session`) stream from its events.

    After feeding, `task_id` holds the server's task id (once seen), `done` tells whether `end` or `error`
    arrived, and `result` / `error` hold the joined payload text or the error text. `received` counts the
    payload characters. With `max_chars`, a payload longer than that is kept as `ClippedJSON` (`clip`):
    `result` is then valid JSON with long strings cut, and memory stays near `max_chars`.

    Example:
        >>> s = CallStream()
        >>> s.on_event("task_id", "t1"); s.on_event("chunk", '{"ok"'); s.on_event("end", ":true}")
        >>> s.task_id, s.done, s.result
        ('t1', True, '{"ok":true}')
    """

    __slots__ = (
        "task_id",
        "done",
        "result",
        "error",
        "received",
        "max_chars",
        "clip",
        "_chunks",
        "_piece_chars",
        "_piece_head",
    )

    def __init__(self, max_chars: int | None = None) -> None:
        self.task_id: str | None = None
        self.done = False
        self.result: str | None = None
        self.error: str | None = None
        self.received = 0
        self.max_chars = max_chars
        self.clip: ClippedJSON | None = None
        self._chunks: list[str] = []
        # The pieces of the event in progress (`PARTIAL`): handed out before the parser knows what event
        # they belong to. Counted, and their head kept, in case it turns out to be a long `error`.
        self._piece_chars = 0
        self._piece_head = ""

    def _add(self, data: str) -> None:
        self.received += len(data)
        clip = self.clip
        if clip is not None:
            clip.feed(data)
            return
        self._chunks.append(data)
        if self.max_chars is not None and self.received > self.max_chars:
            clip = self.clip = ClippedJSON(self.max_chars, self.max_chars + STRUCTURE_ALLOWANCE)
            chunks, self._chunks = self._chunks, []
            chunks.reverse()
            while chunks:  # popped one by one: the raw text is freed as the clipped text grows
                clip.feed(chunks.pop())

    def on_event(self, event: str, data: str) -> None:
        """Take one parsed SSE event (`task_id`, `chunk`, a `PARTIAL` piece, `end`, `error`)."""
        if event == PARTIAL:
            if len(self._piece_head) < _ERROR_MAX:
                self._piece_head += data[: _ERROR_MAX - len(self._piece_head)]
            self._piece_chars += len(data)
            self._add(data)
            return
        if event == "chunk":
            self._add(data)
        elif event == "end":
            self._add(data)
            clip = self.clip
            if clip is not None:
                self.result = clip.finish()
            else:
                chunks = self._chunks
                self.result = chunks[0] if len(chunks) == 1 else "".join(chunks)
            self._chunks = []
            self.done = True
        elif event == "task_id":
            self.task_id = data.strip()[:_TASK_ID_MAX]
        elif event == "error":
            # A long error came in pieces: its head (where a traceback names the exception) is kept, and
            # the pieces were never payload.
            head = self._piece_head + data[: _ERROR_MAX - len(self._piece_head)]
            self.error = head if self._piece_chars + len(data) <= _ERROR_MAX else head + "…"
            self.received -= self._piece_chars
            self._chunks = []
            self.clip = None
            self.done = True
        self._piece_chars = 0
        self._piece_head = ""

    def reset_partial(self) -> None:
        """Drop chunks of an interrupted stream; a resumed stream sends the whole result again."""
        self._chunks = []
        self.clip = None
        self.received = 0
        self._piece_chars = 0
        self._piece_head = ""
