"""Typed errors of the ORS client.

Every error says what happened, to what (environment, session, tool) and what to do. None of them ever
carries a secret or an API key: messages are built from names and server details only.

Example:
    >>> try:
    ...     raise ToolRejected("bad arguments", reason="input_validation", env="echo", tool="echo")
    ... except ORSError as e:
    ...     print(e.reason, e.tool)
    input_validation echo
"""

from __future__ import annotations


class ORSError(Exception):
    """Base class: something went wrong talking to an ORS server.

    Attributes `env`, `session_id` and `tool` name what it happened to (each may be None).

    Example:
        >>> str(ORSError("server answered 418", env="echo", session_id="abc"))
        'server answered 418 [env=echo session=abc]'
    """

    def __init__(
        self, message: str, *, env: str | None = None, session_id: str | None = None, tool: str | None = None
    ) -> None:
        self.message = message
        self.env = env
        self.session_id = session_id
        self.tool = tool
        super().__init__(message)

    def __str__(self) -> str:
        ctx = [
            f"{k}={v}"
            for k, v in (("env", self.env), ("session", self.session_id), ("tool", self.tool))
            if v is not None
        ]
        return f"{self.message} [{' '.join(ctx)}]" if ctx else self.message

    def redact(self, values: tuple[str, ...] | list[str] | None) -> ORSError:
        """Replace each of `values` (secrets, API keys) in this error's texts, and in the ORS errors it
        chains to, with `[redacted]`; returns self. A server that echoes request headers back in its
        error details must not put them into logs or tracebacks.

        Example:
            >>> str(ORSError("bad key sk-123").redact(["sk-123"]))
            'bad key [redacted]'
        """
        if not values:
            return self
        seen: set[int] = set()
        err: BaseException | None = self
        while isinstance(err, ORSError) and id(err) not in seen:
            seen.add(id(err))
            for attr in ("message", "detail"):
                text = getattr(err, attr, None)
                if isinstance(text, str):
                    setattr(err, attr, redact_text(text, values))
            err.args = (err.message,)
            err = err.__cause__ or err.__context__
        return self

    def __reduce__(self):
        # Keeps the keyword-only context across pickling (multiprocessing, Ray, TRL's workers).
        return (_rebuild, (type(self), self.message, dict(self.__dict__)))


def redact_text(text: str, values: tuple[str, ...] | list[str] | None) -> str:
    """`text` with every occurrence of each of `values` replaced by `[redacted]`, longest first (so a
    value inside another does not leave the rest showing). Values under 4 characters are left alone:
    they would blank out ordinary words.

    Example:
        >>> redact_text("key=abcd1234 ok", ["abcd", "abcd1234"])
        'key=[redacted] ok'
    """
    for v in sorted({v for v in values or () if v and len(v) >= 4}, key=len, reverse=True):
        text = text.replace(v, "[redacted]")
    return text


def _rebuild(cls, message, state):
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


class BadTargetError(ORSError, ValueError):
    """A client target that is not an `http(s)://` URL (a catalog name is `Endpoint.for_catalog(name)`).

    Example:
        >>> from ormix.ors import ORSClient
        >>> ORSClient("Eigent/SETA")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        BadTargetError: ...
    """


class TransportError(ORSError):
    """The server could not be reached or the connection failed, after the allowed retries."""


class DeadlineExceeded(ORSError, TimeoutError):
    """A call ran past its deadline (`timeout_s`). The client and the session stay usable.

    Example:
        >>> isinstance(DeadlineExceeded("too slow"), TimeoutError)
        True
    """


class SessionDeadError(ORSError):
    """The session no longer exists on the server (reaped when idle, deleted, or the server restarted).
    Open a new session; this one cannot be revived."""


class SessionOpenError(ORSError):
    """A session could not be opened: `/create` failed or the environment's `setup()` raised. `detail`
    holds the server's own message."""

    def __init__(
        self, message: str, *, detail: str | None = None, status_code: int | None = None, **ctx: str | None
    ) -> None:
        self.detail = detail
        self.status_code = status_code
        super().__init__(message, **ctx)


class ToolRejected(ORSError):
    """The server refused a tool call without running it; the session stays usable.

    `reason` is one of `input_validation`, `not_found`, `episode_finished`, `other`; `detail` is the
    server's message.

    Example:
        >>> ToolRejected("no such tool", reason="not_found").reason
        'not_found'
    """

    REASONS = ("input_validation", "not_found", "episode_finished", "other")

    def __init__(
        self, message: str, *, reason: str = "other", detail: str | None = None, **ctx: str | None
    ) -> None:
        self.reason = reason if reason in self.REASONS else "other"
        self.detail = detail
        super().__init__(message, **ctx)


class ToolFailed(ORSError):
    """The tool ran and raised inside the environment (SSE `error` event). `detail` is the server's text."""

    def __init__(self, message: str, *, detail: str | None = None, **ctx: str | None) -> None:
        self.detail = detail
        super().__init__(message, **ctx)


class ServerError(ORSError):
    """The server answered an HTTP status the client has no better type for. `status_code`, `detail`."""

    def __init__(
        self, message: str, *, status_code: int, detail: str | None = None, **ctx: str | None
    ) -> None:
        self.status_code = status_code
        self.detail = detail
        super().__init__(message, **ctx)


class ProtocolError(ServerError):
    """The server answered, but not in the ORS protocol: a body that is not JSON, JSON of the wrong
    shape, an SSE stream without its `end` event, or a result too large to hold. Not retried; usually
    an incompatible or broken server. `status_code` is the HTTP status of the answer (often 200).

    Example:
        >>> e = ProtocolError("GET /echo/tools answered a body that is not JSON", env="echo")
        >>> isinstance(e, ServerError), e.status_code
        (True, 200)
    """

    def __init__(
        self, message: str, *, status_code: int = 200, detail: str | None = None, **ctx: str | None
    ) -> None:
        super().__init__(message, status_code=status_code, detail=detail, **ctx)


class ScoreGroupUnsupported(ORSError):
    """The environment does not score groups (no ``score_group``, or a server before SDK 0.1.157: its
    ``/score_group`` route answered 404). The session stays usable; keep the pointwise rewards.

    Example:
        >>> isinstance(ScoreGroupUnsupported("no score_group", env="echo"), ORSError)
        True
    """


class ScoreGroupFailed(ORSError):
    """The environment's ``score_group`` raised (a judge that failed) or answered scores that do not match
    the candidates. The session stays usable; keep the pointwise rewards. ``detail``: the server's text.

    Example:
        >>> ScoreGroupFailed("judge failed", detail="JudgeFailure: no verdict").detail
        'JudgeFailure: no verdict'
    """

    def __init__(self, message: str, *, detail: str | None = None, **ctx: str | None) -> None:
        self.detail = detail
        super().__init__(message, **ctx)
