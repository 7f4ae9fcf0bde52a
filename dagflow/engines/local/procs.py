"""Processes: launching a node in its own process group, killing its process group, and orphan cleanup.

Each node runs in a new process group (its group id is its pid), started with posix_spawn in the
runner's working directory (the runner moves into the plan's workdir once), its stdout and stderr
going to pipes the runner reads (output.py). A process group, not a session: setsid(2) costs about 2
ms more per spawn on Linux with scheduler autogroups (each session gets its own), which is most of a
trivial node's cost, and a group is all that killing a node's process tree needs. Ctrl-C in a terminal
reaches only the foreground group (the runner's), which then stops the nodes itself.

If the runner itself is killed (SIGKILL, OOM, a crash), its nodes become orphans whose exit status
nobody can collect. One that writes output dies of SIGPIPE, since the runner held its pipes; one that
does not keeps running. The journal records each node's pid the moment it starts; the next runner on
that run (`--resume`) finds every node the journal shows as running, and if that pid is still the
node's process (its environment, /proc/<pid>/environ, holds the run's DAGFLOW_RUN_ID and the node's
DAGFLOW_NODE) it kills the node's whole process group (SIGTERM, then SIGKILL after a grace period) and
runs the node again. Killing rather than waiting is deliberate: an orphan's exit code is lost, so its
work could never be trusted as finished anyway.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from dagflow.data import with_import_root
from dagflow.plan import DAGFLOW_LAUNCHER


def command_for(argv: list[str], env: dict[str, str]) -> list[str]:
    """A node running dagflow itself uses this interpreter, and can import this dagflow."""
    if argv and argv[0] == DAGFLOW_LAUNCHER:
        env["PYTHONPATH"] = with_import_root(env.get("PYTHONPATH"))
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

    __slots__ = ("pid",)

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self) -> int | None:
        """Its exit code (negative: the signal that killed it), or None while it runs."""
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        return os.waitstatus_to_exitcode(status)


# Python ignores SIGPIPE and SIGXFSZ for itself; a node gets the defaults back, as Popen does.
_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)


def spawn(argv: list[str], env: dict[str, str], file_actions: list[tuple]) -> Child:
    """Start argv in a new process group, in the current directory, with the given file actions.

    posix_spawn starts a process in about half the time subprocess.Popen takes; it cannot change
    directory, which is why the runner runs in the plan's workdir.
    """
    program = resolve_program(argv[0], env.get("PATH", os.defpath))
    pid = os.posix_spawn(program, argv, env, file_actions=file_actions, setpgroup=0, setsigdef=_DEFAULT_SIGNALS)
    return Child(pid)


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


def _read_proc(pid: int, name: str) -> bytes | None:
    try:
        fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (after the parenthesised command name, which may hold spaces)."""
    data = _read_proc(pid, "stat")
    return data[data.rfind(b")") + 2 :].decode().split() if data else None


def kill_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _is_node_process(pid: int, run_id: str, node: str) -> bool:
    """Whether pid is a live (not zombie) process of that run's node, by its environment."""
    environ = _read_proc(pid, "environ")
    if not environ:  # gone, a zombie (its environment is unreadable), or not ours
        return False
    variables = set(environ.split(b"\0"))
    return f"DAGFLOW_RUN_ID={run_id}".encode() in variables and f"DAGFLOW_NODE={node}".encode() in variables


def kill_orphans(orphans: Iterable[tuple[int, str]], run_id: str, grace_s: float) -> int:
    """Kill the process groups of (pid, node) nodes a dead runner of run_id left; return how many lived.

    A pid that no longer exists may still name a process group whose leader exited (Linux keeps a pid
    reserved while it is some group's id), so that group gets SIGKILL; a pid now used by a different
    process (one without that run's and node's DAGFLOW_RUN_ID and DAGFLOW_NODE) means the group is
    gone, and is left alone.
    """
    live = []
    for pid, node in orphans:
        if _is_node_process(pid, run_id, node):
            kill_group(pid, signal.SIGTERM)
            live.append((pid, node))
        elif _read_stat(pid) is None:
            kill_group(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    waiting = list(live)
    while waiting and time.monotonic() < deadline:
        time.sleep(0.05)
        waiting = [(pid, node) for pid, node in waiting if _is_node_process(pid, run_id, node)]
    for pid, _ in live:
        kill_group(pid, signal.SIGKILL)
    return len(live)
