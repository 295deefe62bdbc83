"""The bubblewrap sandbox: confinement (files, network, capabilities), limits, paths, refusal, teardown.

Everything runs for real: bwrap on this machine, a listening socket of the test process, a loopback ORS
server. The "no bwrap" case is a real configuration (ORMIX_BWRAP pointing at a binary that does not exist).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ormix.ors import ORSClient, SessionOpenError
from ormix.server import serve_in_thread
from ormix.workbench.envs.sandbox import (
    WORKDIR,
    Sandbox,
    SandboxError,
    SandboxPathError,
    bwrap_status,
)

BWRAP_WHY = asyncio.run(bwrap_status())
needs_bwrap = pytest.mark.skipif(BWRAP_WHY is not None, reason=f"bubblewrap unusable here: {BWRAP_WHY}")


@contextlib.contextmanager
def fresh_server(envs):
    """serve_in_thread with sse-starlette's process-wide exit event swapped out for its lifetime.

    Workaround, not a fake: sse-starlette binds one global anyio.Event to the event loop of the first SSE
    response in the process, so another loopback server (another thread, another loop) fails every /call
    with "bound to a different event loop". The event is restored afterwards so servers of other test
    modules keep working. The real fix belongs in ormix.server._serving (a per-loop event).
    """
    from sse_starlette.sse import AppStatus

    saved, AppStatus.should_exit_event = AppStatus.should_exit_event, None
    try:
        with serve_in_thread(envs) as srv:
            yield srv
    finally:
        AppStatus.should_exit_event = saved


def run(coro):
    return asyncio.run(coro)


async def in_sandbox(*cmds: str, **kw):
    async with Sandbox(**kw) as sb:
        return sb, [await sb.run(c, timeout=20) for c in cmds]


@needs_bwrap
def test_commands_run_in_workspace_with_python():
    sb, [r] = run(in_sandbox("pwd; echo $HOME; python3 -c 'print(6 * 7)'; ls /"))
    out, code = r  # unpacks like the SDK's RunResult
    lines = out.split("\n")
    assert code == 0 and lines[:3] == [WORKDIR, WORKDIR, "42"]
    assert "root" not in lines[3:] and "home" not in lines[3:] and "work" not in lines[3:]
    assert sb.sandboxed and sb.available


@needs_bwrap
def test_cannot_write_outside_the_workspace(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("original\n")
    cmds = [
        f"echo pwned > {victim}",
        "touch /etc/ormix-pwned",
        "touch /usr/ormix-pwned",
        "mkdir -p /root/x",
        "mount -o remount,rw /usr",
        "echo private > /tmp/ormix-private-probe && cat /tmp/ormix-private-probe",
        "echo ok > inside.txt",
    ]
    sb, results = run(in_sandbox(*cmds))
    *escapes, private, inside = results
    assert all(r.return_code != 0 for r in escapes), [tuple(r) for r in escapes]
    assert "Read-only file system" in escapes[1].output
    assert victim.read_text() == "original\n"  # the host tmp dir is not even visible
    assert not Path("/etc/ormix-pwned").exists() and not Path("/usr/ormix-pwned").exists()
    # /tmp inside is private: it worked there and left nothing in the host's /tmp
    assert tuple(private) == ("private", 0) and not Path("/tmp/ormix-private-probe").exists()
    assert inside.return_code == 0 and not sb.host_dir.exists()  # and the workspace went at close


@needs_bwrap
def test_no_network_even_to_loopback():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # reachable from the host
        probe = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)\""
        _, [r, ifaces] = run(in_sandbox(probe, "cat /proc/net/dev | tail -n +3 | cut -d: -f1"))
    finally:
        listener.close()
    assert r.return_code != 0 and "ConnectionRefusedError" in r.output
    assert ifaces.output.split() == ["lo"]


@needs_bwrap
def test_timeout_kills_the_whole_tree():
    async def main():
        async with Sandbox() as sb:
            t0 = time.monotonic()
            r = await sb.run("sleep 987654 & sleep 987655", timeout=0.5)
            elapsed = time.monotonic() - t0
            fast = await sb.run("echo still usable", timeout=5)
            return r, elapsed, fast

    r, elapsed, fast = run(main())
    assert r.timed_out and r.return_code == 124 and elapsed < 5
    assert tuple(fast) == ("still usable", 0) and not fast.timed_out
    deadline = time.monotonic() + 5
    while _procs_with("98765") and time.monotonic() < deadline:  # SIGKILL delivery is asynchronous
        time.sleep(0.05)
    assert _procs_with("98765") == []


def test_timeout_kills_unsandboxed_group_too():
    async def main():
        async with Sandbox(bwrap="/nonexistent/bwrap", allow_unsandboxed=True) as sb:
            return await sb.run("sleep 987656 & sleep 987657", timeout=0.5)

    r = run(main())
    assert r.timed_out and r.return_code == 124
    deadline = time.monotonic() + 5
    while _procs_with("98765") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _procs_with("98765") == []


def _procs_with(marker: str) -> list[str]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmd and "python" not in cmd:
                found.append(cmd)
    return found


@needs_bwrap
def test_output_cap_exit_codes_and_sanitising():
    async def main():
        async with Sandbox() as sb:
            return [
                await sb.run("head -c 100000 /dev/zero | tr '\\0' a", max_bytes=1000),
                await sb.run("echo hi", max_bytes=1000),
                await sb.run("echo oops >&2; exit 3"),
                await sb.run("kill -9 $$"),
                await sb.run("printf '\\033[31mred\\033[0m\\n'"),
            ]

    big, small, failed, killed, ansi = run(main())
    assert big.truncated and big.output == "a" * 1000 and big.return_code == 0
    assert not small.truncated and tuple(small) == ("hi", 0)
    assert tuple(failed) == ("oops", 3)  # stderr is merged, like the hosted sandboxes
    assert killed.return_code == 137 and not killed.timed_out
    assert ansi.output == "red"


def test_refusal_without_bwrap(monkeypatch):
    monkeypatch.delenv("ORMIX_ALLOW_UNSANDBOXED", raising=False)

    async def main():
        async with Sandbox(bwrap="/nonexistent/bwrap") as sb:
            assert not sb.available and not sb.sandboxed
            sb.write_file("seed.txt", "host-side writes still work\n")  # seeding does not run model commands
            with pytest.raises(SandboxError) as err:
                await sb.run("echo hi")
            return str(err.value)

    msg = run(main())
    assert "apt-get install -y bubblewrap" in msg
    assert "ORMIX_ALLOW_UNSANDBOXED=1" in msg and "allow_unsandboxed=True" in msg
    assert "/nonexistent/bwrap" in msg


def test_explicitly_unsandboxed_runs_plainly(monkeypatch):
    monkeypatch.setenv("ORMIX_BWRAP", "/nonexistent/bwrap")
    monkeypatch.setenv("ORMIX_ALLOW_UNSANDBOXED", "1")

    async def main():
        async with Sandbox() as sb:
            sb.write_file("a.txt", "x\n")
            r = await sb.run("pwd; cat a.txt")
            return sb, r

    sb, r = run(main())
    assert not sb.sandboxed and sb.available
    assert r.output == f"{sb.host_dir}\nx" and r.return_code == 0
    assert sb.workdir == str(sb.host_dir) and not sb.host_dir.exists()


def test_server_session_fails_clearly_without_bwrap(monkeypatch):
    """A terminals session on a machine without bwrap fails to open, with the fix in the message."""
    monkeypatch.setenv("ORMIX_BWRAP", "/nonexistent/bwrap")
    monkeypatch.delenv("ORMIX_ALLOW_UNSANDBOXED", raising=False)

    async def main():
        async with ORSClient(srv.url, env_name="terminals", ping_interval_s=None, timeout_s=30) as c:
            async with c.session(split="train", index=0) as s:
                await s.prompt_text()

    with fresh_server(["local:terminals"]) as srv, pytest.raises(SessionOpenError) as err:
        run(main())
    assert "apt-get install -y bubblewrap" in str(err.value)


@needs_bwrap
def test_session_directory_removed_at_teardown(monkeypatch, tmp_path):
    monkeypatch.setenv("ORMIX_SANDBOX_DIR", str(tmp_path))

    async def main():
        async with ORSClient(srv.url, env_name="seta", ping_interval_s=None, timeout_s=30) as c:
            async with c.session(split="train", index=0) as s:
                await s.prompt_text()
                await s.call("bash", {"command": "mkdir -p deep/er && chmod 000 deep && echo x > f"})
                during = sorted(p.name for p in tmp_path.iterdir())
        return during

    with fresh_server(["local:seta"]) as srv:
        during = run(main())
        after = list(tmp_path.iterdir())
    assert len(during) == 1 and during[0].startswith("ormix-sandbox-")
    assert after == []


@needs_bwrap
def test_download_upload_are_confined(tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    local = tmp_path / "up.txt"
    local.write_text("uploaded\n")

    async def main():
        async with Sandbox() as sb:
            await sb.upload(local, "/workspace/in/up.txt")
            got = await sb.download("in/up.txt")
            seen = await sb.run("cat in/up.txt")
            await sb.run(f"ln -s {outside} link; ln -s /etc/passwd pw; ln -s up.txt in/alias")
            alias = await sb.download("/workspace/in/alias")
            errors = []
            for bad in ("link", "pw", "../secret.txt", "/etc/passwd", "/workspace/../etc/passwd"):
                with pytest.raises(SandboxPathError):
                    await sb.download(bad)
                errors.append(bad)
            with pytest.raises(SandboxPathError):
                await sb.upload(local, "link")
            with pytest.raises(SandboxPathError):
                await sb.upload(local, "/tmp/x")
            with pytest.raises(FileNotFoundError):
                await sb.download("missing.txt")
            with pytest.raises(RuntimeError, match="Command failed"):
                await sb.check_run("exit 2")
            return got, seen, alias, errors

    got, seen, alias, errors = run(main())
    assert got == b"uploaded\n" and tuple(seen) == ("uploaded", 0) and alias == b"uploaded\n"
    assert len(errors) == 5 and outside.read_text() == "secret\n"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["..", ".", "a", "b", "", "/", "workspace", "/workspace", "x/.."]), max_size=8)
)
def test_relpath_never_leaves_the_workspace(parts):
    sb = Sandbox(bwrap="/nonexistent/bwrap")  # relpath is pure: no start needed
    path = "/".join(parts) or "."
    try:
        rel = sb.relpath(path)
    except SandboxPathError:
        return
    assert not rel.startswith("/") and ".." not in rel.split("/")
    assert os.path.normpath(os.path.join(WORKDIR, rel)).startswith(WORKDIR)


def test_terminals_tells_a_closed_sandbox_from_a_missing_bubblewrap(monkeypatch):
    # Only bubblewrap's absence is answered to the model as tool output; a sandbox used after it closed is a
    # bug in the environment, and raises. (Unsandboxed runs allowed: so it runs without bubblewrap too.)
    monkeypatch.setenv("ORMIX_ALLOW_UNSANDBOXED", "1")
    import anyio

    from ormix.workbench.envs.sandbox import SandboxError
    from ormix.workbench.envs.terminals import BashParams, Terminals

    async def main() -> None:
        env = Terminals(task_spec=Terminals.list_tasks("train")[0])
        await env.setup()
        assert env.sandbox.refusal is None
        await env.sandbox.close()
        with pytest.raises(SandboxError, match="closed"):
            await env.bash(BashParams(command="echo hi"))

    anyio.run(main)


def test_unsandboxed_temporary_files_stay_in_the_session(tmp_path):
    """Unsandboxed, `mktemp` (graders use it) writes under the session, and close() removes it all."""
    import tempfile

    async def main():
        async with Sandbox(bwrap="/nonexistent/bwrap", allow_unsandboxed=True, base_dir=tmp_path) as sb:
            r = await sb.run(
                "mktemp && mktemp -d && python3 -c 'import tempfile; print(tempfile.gettempdir())'"
            )
            return sb, r

    host_tmp = set(os.listdir(tempfile.gettempdir()))
    sb, r = run(main())
    made = r.output.split("\n")
    assert r.return_code == 0 and len(made) == 3, r.output
    assert all(Path(p).resolve().is_relative_to(tmp_path.resolve()) for p in made), made
    assert not any(Path(p).resolve().is_relative_to(sb.host_dir) for p in made)  # not among graded files
    assert list(tmp_path.iterdir()) == []
    assert not {Path(p).name for p in made[:2]} & (set(os.listdir(tempfile.gettempdir())) - host_tmp)
