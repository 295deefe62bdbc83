"""A per-session sandbox for model commands: a temporary directory plus bubblewrap (`bwrap`).

Each command runs in a fresh bubblewrap container:

- the host's `/usr` and `/etc` are mounted read-only (with `/bin`, `/lib`, ... as the usual links), so
  coreutils, grep/sed/awk and `python3` work but nothing of the host is writable or even visible beyond that
  (no `/root`, no `/home`, no host `/tmp`);
- the session directory is bound read-write at `/workspace`, the working directory;
- `/tmp` is a private tmpfs; `/proc` and `/dev` are the container's own; the rest of `/` is read-only;
- no network (`--unshare-net`: only a loopback device of its own), own PID/IPC/UTS namespaces, all
  capabilities dropped (as root, bwrap would keep them, and a capable root could remount `/usr` read-write);
- `--die-with-parent`; a timeout kills the whole process group, and with the PID namespace every process
  the command left behind dies with it;
- output is capped at `max_bytes` with a truncation flag, like the hosted sandboxes' `RunResult`.

The object has the async interface the openreward SDK's `CLIToolset` expects of `env.sandbox`
(`run`, `check_run`, `download`, `upload`), plus host-side helpers for seeding and grading.

Without a working `bwrap` the sandbox refuses to run model commands (`SandboxError`, with what to
do) unless unsandboxed runs are explicitly allowed (`allow_unsandboxed=True` or `ORMIX_ALLOW_UNSANDBOXED=1`);
then commands run plainly in the session directory, which is then also the working directory the model sees,
with `TMPDIR` a directory of the session's own (removed with it).

Settings read from the environment at construction: `ORMIX_BWRAP` (path of the bwrap binary, default
`bwrap` on `PATH`), `ORMIX_ALLOW_UNSANDBOXED` (`1`/`true`/`yes`), `ORMIX_SANDBOX_DIR` (where session
directories are created, default the system temporary directory).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import posixpath
import re
import shutil
import signal
import stat
import tempfile
from pathlib import Path

from openreward.api.sandboxes.types import RunResult

from ormix._errors import OrmixRuntimeError

#: Where the session directory appears inside the sandbox.
WORKDIR = "/workspace"
#: Defaults of the hosted sandboxes' `run` (openreward's `AsyncSandboxesAPI.run`).
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MAX_BYTES = 50_000
#: Exit code of a command killed at its deadline (the `timeout(1)` convention the hosted sandboxes use).
TIMEOUT_EXIT_CODE = 124

_TRUE = {"1", "true", "yes", "on"}
_ANSI_ESCAPE_RE = re.compile(r"\x1b(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])")
_CONTROL_CHARS = {c: None for c in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0))}
# `bwrap` probes are cached per binary path: a working bwrap keeps working for the life of the process.
_PROBES: dict[str, str | None] = {}


class SandboxError(OrmixRuntimeError):
    """The sandbox cannot run this: not started, closed, a file over its limit, or no working bubblewrap
    while unsandboxed runs are not allowed (every model command is then refused, saying how to fix it)."""


class SandboxPathError(SandboxError, ValueError):
    """A path outside the session's workspace (absolute elsewhere, through `..` or a symlink out)."""


def _sanitise(text: str) -> str:
    # Same clean-up as the hosted sandboxes: no ANSI escapes or control characters reach the model.
    return _ANSI_ESCAPE_RE.sub("", text).translate(_CONTROL_CHARS)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def _unavailable_message(bwrap: str, why: str) -> str:
    return (
        f"ormix sandbox: model commands are refused because bubblewrap is not usable ({why}; "
        f"bwrap={bwrap!r}). Install it (Debian/Ubuntu: `apt-get install -y bubblewrap`; it needs "
        "unprivileged user namespaces or root), or point ORMIX_BWRAP at a working bwrap binary. To run model "
        "commands WITHOUT isolation (no sandbox: they can read and write your files and reach the network), "
        "set ORMIX_ALLOW_UNSANDBOXED=1 or pass allow_unsandboxed=True."
    )


def _bwrap_base_args(bwrap: str, host_dir: str) -> list[str]:
    """The bubblewrap command line with ``host_dir`` as the working directory, up to its own settings
    (shared by the probe and every run)."""
    args = [bwrap, "--ro-bind", "/usr", "/usr"]
    for link in ("bin", "lib", "lib64", "sbin", "lib32", "libx32"):
        host = Path("/") / link
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{link}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{link}"]
    if Path("/etc").is_dir():
        args += ["--ro-bind", "/etc", "/etc"]
    args += [
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--setenv",
        "TERM",
        "dumb",
        "--bind",
        host_dir,
        WORKDIR,
        "--remount-ro",
        "/",
        "--chdir",
        WORKDIR,
    ]
    return args


async def bwrap_status(bwrap: str | None = None) -> str | None:
    """None if `bwrap` can start a sandbox here, else why not (cached per binary path).

    Example:
        >>> import asyncio; asyncio.run(bwrap_status("/nonexistent/bwrap"))   # doctest: +ELLIPSIS
        '... not found'
    """
    path = bwrap or os.environ.get("ORMIX_BWRAP") or "bwrap"
    if path in _PROBES:
        return _PROBES[path]
    resolved = shutil.which(path)
    if resolved is None:
        why: str | None = f"{path} not found"
    else:
        with tempfile.TemporaryDirectory(prefix="ormix-probe-") as d:
            cmd = [*_bwrap_base_args(resolved, d), "--", "/bin/sh", "-c", "echo ok > probe"]
            try:
                proc = await asyncio.create_subprocess_exec(
                    *cmd,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                )
                out, _ = await asyncio.wait_for(proc.communicate(), timeout=20)
            except (OSError, asyncio.TimeoutError) as e:
                why = f"{resolved} could not start: {e!r}"
            else:
                ok = proc.returncode == 0 and (Path(d) / "probe").exists()
                why = (
                    None
                    if ok
                    else (
                        f"{resolved} failed to create a sandbox (exit {proc.returncode}): "
                        f"{out.decode(errors='replace').strip()[:300]}"
                    )
                )
    _PROBES[path] = why
    return why


class Sandbox:
    """A per-session working directory in which model commands run under bubblewrap.

    Call `await start()` (creates the directory, checks bwrap) before `run`; `close()` kills what still runs
    and removes the directory. Paths given to `download`/`upload`/`write_file`/`read_file` are sandbox
    paths: relative to the working directory or absolute under it (`/workspace/a.txt`); anything that
    would leave the directory (including through a symlink) raises `SandboxPathError`.

    Example:
        >>> async def demo():
        ...     async with Sandbox() as sb:
        ...         sb.write_file("hello.txt", "hi\\n")
        ...         output, code = await sb.run("cat hello.txt && touch /etc/x")
        ...         return output, code
        >>> # asyncio.run(demo()) -> ('hi\\ntouch: cannot touch ...: Read-only file system', 1)
    """

    def __init__(
        self,
        *,
        bwrap: str | None = None,
        allow_unsandboxed: bool | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        default_timeout: float = DEFAULT_TIMEOUT_S,
        default_max_bytes: int = DEFAULT_MAX_BYTES,
        max_file_bytes: int | None = 512 * 2**20,
        max_memory_bytes: int | None = 4 * 2**30,
    ) -> None:
        self.bwrap = bwrap or os.environ.get("ORMIX_BWRAP") or "bwrap"
        self.allow_unsandboxed = (
            _env_flag("ORMIX_ALLOW_UNSANDBOXED") if allow_unsandboxed is None else allow_unsandboxed
        )
        self.base_dir = base_dir if base_dir is not None else (os.environ.get("ORMIX_SANDBOX_DIR") or None)
        self.default_timeout = default_timeout
        self.default_max_bytes = default_max_bytes
        self.max_file_bytes = max_file_bytes
        self.max_memory_bytes = max_memory_bytes
        self._dir: Path | None = None
        self._tmp: Path | None = None
        self._bwrap_path: str | None = None
        self._refusal: str | None = None
        self._procs: set[asyncio.subprocess.Process] = set()
        self._closed = False

    # ── lifecycle ────────────────────────────────────────────────────────────────────────────────

    async def start(self) -> Sandbox:
        """Create the session directory and find out whether bubblewrap works. Idempotent."""
        if self._closed:
            raise SandboxError("this sandbox was closed; create a new one")
        if self._dir is not None:
            return self
        why = await bwrap_status(self.bwrap)
        if why is None:
            self._bwrap_path = shutil.which(self.bwrap)
        elif not self.allow_unsandboxed:
            self._refusal = _unavailable_message(self.bwrap, why)
        self._dir = Path(tempfile.mkdtemp(prefix="ormix-sandbox-", dir=self.base_dir)).resolve()
        if why is not None and self.allow_unsandboxed:
            # Unsandboxed commands (graders' `mktemp` included) would otherwise leave their temporary files
            # in the host's /tmp; bwrap gives each command a private one. Beside the workspace, not in it,
            # so it is not one of the files the task is graded on.
            self._tmp = Path(tempfile.mkdtemp(prefix="ormix-sandbox-tmp-", dir=self.base_dir)).resolve()
        return self

    async def close(self) -> None:
        """Kill commands still running and remove the directory. Idempotent."""
        self._closed = True
        for proc in list(self._procs):
            _kill_group(proc)
        for proc in list(self._procs):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), timeout=5)
        for d in (self._dir, self._tmp):
            if d is not None:
                _rmtree(d)

    async def __aenter__(self) -> Sandbox:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ── state ────────────────────────────────────────────────────────────────────────────────────

    @property
    def host_dir(self) -> Path:
        """The session directory on the host (exists between `start()` and `close()`)."""
        if self._dir is None:
            raise SandboxError("sandbox not started: call `await sandbox.start()` first")
        return self._dir

    @property
    def sandboxed(self) -> bool:
        """True when commands run under bubblewrap (after `start()`)."""
        return self._bwrap_path is not None

    @property
    def available(self) -> bool:
        """False when model commands are refused (no bwrap, unsandboxed runs not allowed)."""
        return self._refusal is None

    @property
    def refusal(self) -> str | None:
        """Why commands are refused, or None."""
        return self._refusal

    @property
    def workdir(self) -> str:
        """The working directory as commands see it: `/workspace`, or the host directory when unsandboxed."""
        if self._dir is None or self._bwrap_path is not None or self._refusal is not None:
            return WORKDIR
        return str(self._dir)

    # ── commands ─────────────────────────────────────────────────────────────────────────────────

    def _command(self, cmd: str) -> list[str]:
        limits = []
        if self.max_file_bytes is not None:
            limits.append(f"-f {max(1, self.max_file_bytes // 512)}")  # bash counts 512-byte blocks
        if self.max_memory_bytes is not None:
            limits.append(f"-v {max(1, self.max_memory_bytes // 1024)}")
        # Limits set without -S/-H are hard limits; with every capability dropped they cannot be raised.
        # The model's command travels as "$1", never spliced into the wrapper.
        wrapper = (f"ulimit {' '.join(limits)} 2>/dev/null; " if limits else "") + 'exec /bin/bash -c "$1"'
        inner = ["/bin/bash", "-c", wrapper, "ormix-sandbox", cmd]
        if self._bwrap_path is None:
            return inner
        return [
            *_bwrap_base_args(self._bwrap_path, str(self.host_dir)),
            "--setenv",
            "HOME",
            WORKDIR,
            "--",
            *inner,
        ]

    async def run(
        self,
        cmd: str,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        sanitise: bool = True,
    ) -> RunResult:
        """Run `cmd` with bash in the sandbox; unpacks to `(output, return_code)`.

        stdout and stderr are merged; trailing whitespace is stripped. `timeout` (seconds, None = no limit)
        kills the whole process group and sets `timed_out` (exit code 124); output beyond `max_bytes` bytes is
        cut off and sets `truncated`.

        Raises:
            SandboxError: bubblewrap is unusable and unsandboxed runs are not allowed.
        """
        if self._dir is None:
            await self.start()
        if self._refusal is not None:
            raise SandboxError(self._refusal)
        if self._closed:
            raise SandboxError("this sandbox was closed; the session is over")
        proc = await asyncio.create_subprocess_exec(
            *self._command(cmd),
            cwd=str(self.host_dir),
            env=self._unsandboxed_env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        self._procs.add(proc)
        kept = bytearray()
        total = 0

        async def drain() -> None:
            nonlocal total
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(65536):
                total += len(chunk)
                # Keep reading past the cap (and drop it) so the command never blocks on a full pipe.
                if max_bytes is None or len(kept) < max_bytes + 1:
                    kept.extend(chunk)
            await proc.wait()

        timed_out = False
        try:
            await asyncio.wait_for(drain(), timeout=timeout if timeout and timeout > 0 else None)
        except asyncio.TimeoutError:
            timed_out = True
        finally:
            # Unsandboxed, whatever the command left in its process group goes too; under bwrap the PID
            # namespace already took it, and a reaped leader's id must not be signalled.
            if timed_out or proc.returncode is None or self._bwrap_path is None:
                _kill_group(proc)
            if proc.returncode is None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), timeout=5)
            self._procs.discard(proc)
        data = bytes(kept)
        truncated = max_bytes is not None and total > max_bytes
        if max_bytes is not None:
            data = data[:max_bytes]
        output = data.decode("utf-8", errors="replace").rstrip()
        if sanitise:
            output = _sanitise(output)
        code = TIMEOUT_EXIT_CODE if timed_out else (proc.returncode if proc.returncode is not None else -1)
        if code < 0:  # killed by a signal: report it the way a shell would
            code = 128 - code
        return RunResult(
            output=output, return_code=code, truncated=truncated, timed_out=timed_out, sanitised=sanitise
        )

    def _unsandboxed_env(self) -> dict[str, str] | None:
        """A command's environment without bubblewrap (under it, bwrap sets its own): a minimal one, with
        its temporary files in the session's own directory, removed with it."""
        if self._bwrap_path is not None:
            return None
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.host_dir),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        if self._tmp is not None:
            env["TMPDIR"] = str(self._tmp)
        return env

    async def check_run(
        self,
        cmd: str,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        sanitise: bool = True,
    ) -> str:
        """`run`, raising `RuntimeError` (as the hosted sandbox does) when the exit code is not 0."""
        result = await self.run(cmd, timeout=timeout, max_bytes=max_bytes, sanitise=sanitise)
        if result.return_code != 0:
            raise RuntimeError(f"Command failed: {cmd}\n{result.output}")
        return result.output

    # ── files (host side, confined to the workspace) ─────────────────────────────────────────────

    def relpath(self, path: str) -> str:
        """The workspace-relative form of a sandbox path, or `SandboxPathError` if it points outside.

        Example: `relpath("/workspace/a/../b.txt") == "b.txt"`, `relpath("c/d") == "c/d"`.
        """
        if not isinstance(path, str) or not path or "\x00" in path:
            raise SandboxPathError(f"invalid path {path!r}")
        work = self.workdir
        norm = posixpath.normpath(path if path.startswith("/") else posixpath.join(work, path))
        if norm == work:
            return "."
        if not norm.startswith(work.rstrip("/") + "/"):
            raise SandboxPathError(
                f"{path!r} is outside the workspace {work}; only files under it can be "
                f"read or written this way (use the shell for the rest)"
            )
        return norm[len(work.rstrip("/")) + 1 :]

    def host_path(self, path: str) -> Path:
        """The host path of a sandbox path, with symlinks resolved; refuses anything outside the workspace."""
        root = self.host_dir
        target = Path(os.path.realpath(root / self.relpath(path)))
        if target != root and root not in target.parents:
            raise SandboxPathError(f"{path!r} resolves outside the workspace (through a symlink); refused")
        return target

    def _open(self, path: str, flags: int, mode: int = 0o644) -> int:
        """Open a workspace file without following any symlink the sandbox could swap in meanwhile."""
        rel = self.host_path(path).relative_to(self.host_dir)
        parts = rel.parts
        if not parts:
            raise SandboxPathError(f"{path!r} is the workspace directory itself, not a file")
        fd = os.open(self.host_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for i, part in enumerate(parts[:-1]):
                try:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not flags & os.O_CREAT:
                        raise
                    os.mkdir(part, 0o755, dir_fd=fd)
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as e:
                    raise SandboxPathError(
                        f"{path!r}: {'/'.join(parts[: i + 1])} is not a plain directory ({e.strerror})"
                    ) from None
                os.close(fd)
                fd = nxt
            try:
                # O_NONBLOCK: opening a named pipe with no other end would otherwise wait forever, and
                # the sandbox can make any workspace path one.
                leaf = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode, dir_fd=fd)
            except OSError as e:
                if e.errno == errno.ELOOP:  # a symlink appeared after resolution
                    raise SandboxPathError(f"{path!r} changed into a symlink; refused") from None
                if e.errno == errno.ENXIO:  # a pipe or socket opened for writing with no reader
                    raise _not_regular(path, "a named pipe or socket") from None
                raise
        finally:
            os.close(fd)
        try:
            st = os.fstat(leaf)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(f"{path!r} is a directory, not a regular file")
            if not stat.S_ISREG(st.st_mode):
                raise _not_regular(path, _KINDS.get(stat.S_IFMT(st.st_mode), "a special file"))
            os.set_blocking(leaf, True)
        except BaseException:
            os.close(leaf)
            raise
        return leaf

    def _open_dir(self, path: str) -> int:
        """Open a workspace directory without following any symlink the sandbox could swap in meanwhile.

        Raises NotADirectoryError when it is something else (a file), `SandboxPathError` for a symlink.
        """
        parts = self.host_path(path).relative_to(self.host_dir).parts
        fd = os.open(self.host_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for i, part in enumerate(parts):
                try:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except NotADirectoryError:
                    # A symlink opened with O_NOFOLLOW | O_DIRECTORY is "not a directory" too.
                    if stat.S_ISLNK(os.lstat(part, dir_fd=fd).st_mode):
                        raise SandboxPathError(
                            f"{path!r}: {'/'.join(parts[: i + 1])} changed into a symlink; refused"
                        ) from None
                    raise NotADirectoryError(
                        f"{path!r}: {'/'.join(parts[: i + 1])} is not a directory"
                    ) from None
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def list_dir(self, path: str) -> list[str]:
        """The entries of a workspace directory (host side), sorted: subdirectories with a trailing `/`,
        symlinks as `name -> target` (never followed, so a link cannot show what lies outside).

        Raises NotADirectoryError when `path` is not a directory, `SandboxPathError` outside the workspace.
        """
        fd = self._open_dir(path)
        try:
            entries = []
            with os.scandir(fd) as it:
                for e in it:
                    if e.is_symlink():
                        entries.append(f"{e.name} -> {os.readlink(e.name, dir_fd=fd)}")
                    else:
                        entries.append(e.name + ("/" if e.is_dir(follow_symlinks=False) else ""))
            return sorted(entries)
        finally:
            os.close(fd)

    def read_bytes(self, path: str, max_size: int | None = 256 * 2**20) -> bytes:
        """Read a workspace file (host side); FileNotFoundError, IsADirectoryError or SandboxPathError."""
        fd = self._open(path, os.O_RDONLY)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if max_size is not None and st.st_size > max_size:
                raise SandboxError(f"{path!r} is {st.st_size} bytes, over the {max_size}-byte limit")
            return f.read()

    def read_file(self, path: str, encoding: str = "utf-8") -> str:
        """`read_bytes` decoded (invalid bytes replaced)."""
        return self.read_bytes(path).decode(encoding, errors="replace")

    def write_bytes(self, path: str, data: bytes, mode: int | None = None) -> None:
        """Create or replace a workspace file (host side), creating parent directories."""
        fd = self._open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.truncate(0)
            f.write(data)
            if mode is not None:
                os.fchmod(f.fileno(), mode)

    def write_file(self, path: str, text: str, mode: int | None = None) -> None:
        """`write_bytes` of UTF-8 text."""
        self.write_bytes(path, text.encode("utf-8"), mode)

    def exists(self, path: str) -> bool:
        """Whether a workspace path exists (False for paths outside the workspace)."""
        try:
            return self.host_path(path).exists()
        except SandboxPathError:
            return False

    async def download(self, container_path: str, max_size: int | None = 256 * 2**20) -> bytes:
        """Read a file of the sandbox (the SDK's `download`). Only workspace paths can be read."""
        return await asyncio.to_thread(self.read_bytes, container_path, max_size)

    async def upload(self, local_path: str | os.PathLike[str], container_path: str) -> None:
        """Copy a host file into the workspace (the SDK's `upload`)."""
        data = await asyncio.to_thread(Path(local_path).read_bytes)
        await asyncio.to_thread(self.write_bytes, container_path, data)


_KINDS = {
    stat.S_IFIFO: "a named pipe",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def _not_regular(path: str, kind: str) -> SandboxPathError:
    return SandboxPathError(
        f"{path} is not a regular file ({kind}); only regular files can be read or written this way "
        f"(use the shell for the rest)"
    )


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _rmtree(path: Path) -> None:
    def make_writable(func, p, _exc):  # a command may have left read-only directories behind
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
        with contextlib.suppress(OSError):
            func(p)

    shutil.rmtree(path, onerror=make_writable)
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
