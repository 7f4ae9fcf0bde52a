"""Processes: launching a node in its own process group, killing its process group, and orphan cleanup.

Each node runs in a new process group (its group id is its pid), its stdout and stderr going to
pipes the runner reads (output.py). A process group, not a session: setsid(2) costs about 2 ms
more per spawn on Linux with scheduler autogroups (each session gets its own), which is most of a
trivial node's cost, and a group is all that killing a node's process tree needs. Ctrl-C in a terminal
reaches only the foreground group (the runner's), which then stops the nodes itself.

If the runner itself is killed (SIGKILL, OOM, a crash), its nodes become orphans whose exit status
nobody can collect. One that writes output dies of SIGPIPE, since the runner held its pipes; one that
does not keeps running. The journal records each node's pid and process start time the moment it
starts; the next runner on that run (`--resume`) finds every node the journal shows as running, and if
that pid is still the same process (same start time) it kills the node's whole process group (SIGTERM,
then SIGKILL after a grace period) and runs the node again. Killing rather than waiting is deliberate:
an orphan's exit code is lost, so its work could never be trusted as finished anyway.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import dagflow
from dagflow.plan import DAGFLOW_LAUNCHER

_PACKAGE_ROOT = str(Path(dagflow.__file__).resolve().parent.parent)


def command_for(argv: list[str], env: dict[str, str]) -> list[str]:
    """A node running dagflow itself uses this interpreter, and can import this dagflow."""
    if argv and argv[0] == DAGFLOW_LAUNCHER:
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = f"{_PACKAGE_ROOT}{os.pathsep}{path}" if path else _PACKAGE_ROOT
        return [sys.executable, "-m", "dagflow", *argv[1:]]
    return argv


def with_interpreter_on_path(path: str) -> str:
    """PATH with this interpreter's directory first, as if its virtual environment were activated:
    a node's `python` is then the one running dagflow, with the same packages installed."""
    bindir = str(Path(sys.executable).parent)
    parts = path.split(os.pathsep) if path else []
    return path if parts[:1] == [bindir] else os.pathsep.join([bindir, *parts])


class Child:
    """A started node process. Reaped with waitpid(pid) only, never a wait for any child, so the
    runner can live inside a program that has children of its own."""

    __slots__ = ("_popen", "pid")

    def __init__(self, pid: int, popen: subprocess.Popen[bytes] | None = None) -> None:
        self.pid = pid
        self._popen = popen  # kept so that subprocess never reaps it behind our back

    def poll(self) -> int | None:
        """Its exit code (negative: the signal that killed it), or None while it runs."""
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        code = os.waitstatus_to_exitcode(status)
        if self._popen is not None:
            self._popen.returncode = code
        return code


# Python ignores SIGPIPE and SIGXFSZ for itself; a node gets the defaults back, as Popen does.
_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)


def spawn(argv: list[str], cwd: str, env: dict[str, str], stdin: int, stdout: int, stderr: int) -> Child:
    """Start argv in a new process group with the given stdin, stdout and stderr fds.

    Where cwd is already the current directory, posix_spawn is used: it has no way to change
    directory, but starts a process in about half the time Popen takes.
    """
    if os.getcwd() == cwd:
        actions = [(os.POSIX_SPAWN_DUP2, stdin, 0), (os.POSIX_SPAWN_DUP2, stdout, 1), (os.POSIX_SPAWN_DUP2, stderr, 2)]
        program = resolve_program(argv[0], env.get("PATH", os.defpath))
        pid = os.posix_spawn(program, argv, env, file_actions=actions, setpgroup=0, setsigdef=_DEFAULT_SIGNALS)
        return Child(pid)
    popen = subprocess.Popen(argv, cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr, process_group=0)
    return Child(popen.pid, popen)


_resolved: dict[tuple[str, str], str] = {}


def resolve_program(name: str, path: str) -> str:
    """name looked up in the node's PATH (posix_spawnp would search the runner's own PATH).

    Only successful lookups are cached: a program an earlier node installs must still be found.
    """
    if os.sep in name:
        return name
    key = (name, path)
    found = _resolved.get(key) or shutil.which(name, path=path)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
    _resolved[key] = found
    return found


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    stat = _read_stat(pid)
    return int(stat[19]) if stat else None


def _read_stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (after the parenthesised command name, which may hold spaces)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data[data.rfind(b")") + 2 :].decode().split()


def kill_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _same_live_process(pid: int, ticks: int) -> bool:
    stat = _read_stat(pid)
    return stat is not None and stat[0] != "Z" and int(stat[19]) == ticks


def kill_orphans(orphans: Iterable[tuple[int, int | None]], grace_s: float) -> int:
    """Kill the process groups of (pid, start ticks) nodes a dead runner left; return how many lived.

    A pid that no longer exists may still name a process group whose leader exited (Linux keeps a pid
    reserved while it is some group's id), so that group gets SIGKILL; a pid now used by a different
    process (other start time) means the group is gone, and is left alone.
    """
    live = []
    for pid, ticks in orphans:
        if ticks is not None and _same_live_process(pid, ticks):
            kill_group(pid, signal.SIGTERM)
            live.append((pid, ticks))
        elif _read_stat(pid) is None:
            kill_group(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    waiting = list(live)
    while waiting and time.monotonic() < deadline:
        time.sleep(0.05)
        waiting = [(pid, ticks) for pid, ticks in waiting if _same_live_process(pid, ticks)]
    for pid, _ in live:
        kill_group(pid, signal.SIGKILL)
    return len(live)
