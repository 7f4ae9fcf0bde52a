"""What a node started dies with it: the processes a node left behind outside its process group.

The keeper kills a node's process group when the node exits (keeper.py), which ends every descendant
still in that group. A descendant that called setsid(2) (a daemon, `setsid cmd &`, a double fork) left
the group; the runner's NodeReaper finds and kills such strays, in one of two ways:

- **A cgroup v2 for the run**, where this process's own cgroup v2 directory is writable (root, or a user
  cgroup systemd delegated): `<own cgroup>/dagflow-<run id>-<hash of the run directory>-<runner pid>`.
  The keeper is moved into it before it starts any node, so every node and every descendant of one is
  born inside it, and none can leave it (setsid, a double fork, `env -i`: none of them changes a
  cgroup). Finding strays is reading its `cgroup.procs`: no window, nothing walked, nothing paid per
  node start. (A cgroup per node would cost a cgroup migration per node, about 1 ms of the runner's
  loop, and posix_spawn cannot start a process inside one: a child forked before the move escapes.)
- **The environment**, where there is no such cgroup (or DAGFLOW_CGROUP=off): every node runs with
  DAGFLOW_RUN_ID, DAGFLOW_RUN_DIR and DAGFLOW_NODE, and its descendants inherit them; every process on
  the machine is a candidate, so this sweep runs at most every SWEEP_WITHOUT_CGROUP_S.

When nodes have ended, the runner's next turn sweeps: a candidate whose environment (/proc/<pid>/environ)
names this run (its id and directory: an id is unique in its runs directory only) and a node that does
not run now is killed with SIGKILL, through a pidfd (a pid reused meanwhile is never hit). A running
node's strays are left alone, adopted nodes' (an earlier runner's) included: a node may start a daemon
it talks to. At the end of the run (not when the runner stops for a full disk, which leaves nodes
running for a resume) everything left in the run's cgroups (its own, adopted nodes', and earlier
runners' of the same run beside it) is killed (`cgroup.kill`) and the cgroups removed, and every process
on the machine whose environment names this run and a node is killed.

Limits:
- A stray that also cleared its environment (`env -i`) names no node: with a cgroup it is killed at the
  end of the run, not when its node ends; without one it is never found.
- Without a cgroup, a node that fails and runs again at once (a retry) can start before the sweep: its
  earlier attempt's strays then live until the retry ends.
- A process started through a daemon (`systemd-run`, `docker run`) is not a descendant, and is left.
- A killed runner (SIGKILL, OOM) leaves its nodes running for a resume to adopt (procs.py); their strays
  wait for the runner that ends them, and its cgroup (empty once they end) for the end of a resume.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import signal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from dagflow.engines.local.procs import dagflow_environment, is_keeper

CGROUP_SWITCH = "DAGFLOW_CGROUP"  # "off": the environment sweep only, even where a cgroup could be made
SWEEP_WITHOUT_CGROUP_S = 0.25  # a walk of /proc reads every process's environment: ~1-5 ms
_EMPTY_WAIT_S = 10.0  # how long the end of the run waits for killed processes to leave a cgroup


class NodeReaper:
    """Kills the processes nodes of one run left outside their process groups (the module says how)."""

    def __init__(self, run_id: str, run_dir: Path, cgroup: Path | None) -> None:
        self.run_id = run_id
        self.run_dir = run_dir
        self._real_run_dir = os.path.realpath(run_dir)
        self.cgroup = cgroup
        self._cgroups: set[Path] = {cgroup} if cgroup is not None else set()
        self._pending = True  # the first turn sweeps what nodes that ended under an earlier runner left
        self._last = -math.inf

    @classmethod
    def for_run(cls, run_id: str, run_dir: Path, env: Mapping[str, str]) -> NodeReaper:
        """A reaper with a new cgroup for this runner where one can be made, without one otherwise."""
        name = f"{cgroup_prefix(run_id, run_dir)}{os.getpid()}"
        cgroup = None if env.get(CGROUP_SWITCH) == "off" else _make_cgroup(name)
        return cls(run_id, run_dir, cgroup)

    def contain(self, keeper: int) -> None:
        """Move the keeper into the run's cgroup; called before it is asked to start any node."""
        if self.cgroup is None:
            return
        try:
            _write(self.cgroup / "cgroup.procs", str(keeper))
        except OSError:  # not ours to move (an undelegated cgroup), or a threaded one: no cgroup, then
            _remove(self.cgroup)
            self._cgroups.discard(self.cgroup)
            self.cgroup = None

    def adopted(self, pid: int) -> None:
        """An adopted node's cgroup, an earlier runner's of this run, is swept and removed as this run's."""
        cgroup = _cgroup_dir(_read_text(f"/proc/{pid}/cgroup"))
        if cgroup is not None and cgroup.name.startswith(cgroup_prefix(self.run_id, self.run_dir)):
            self._cgroups.add(cgroup)

    def node_ended(self) -> None:
        self._pending = True

    def due_in(self, now: float) -> float | None:
        """Seconds until the next sweep may run; None while no node has ended since the last one."""
        if not self._pending:
            return None
        return max(0.0, self._last + self._interval() - now)

    def sweep(self, running: Mapping[str, int | None]) -> None:
        """Kill the strays of nodes that do not run now; running maps each running node to its pid (its
        process group), None until the keeper said it started."""
        self._pending = False
        self._last = time.monotonic()
        groups = {pid for pid in running.values() if pid}
        candidates = _all_pids() if self.cgroup is None else _members(self._cgroups, recursive=False)
        self._kill_strays((pid for pid in candidates if pid not in groups), running)

    def close(self) -> None:
        """The end of the run: kill what is left of its nodes, and remove its cgroups."""
        cgroups = self._cgroups | set(self._earlier_cgroups())
        for cgroup in cgroups:
            _kill_cgroup(cgroup)
        for cgroup in cgroups:
            _remove(cgroup)
        self._kill_strays(_all_pids(), {})

    def _interval(self) -> float:
        return 0.0 if self.cgroup is not None else SWEEP_WITHOUT_CGROUP_S

    def _earlier_cgroups(self) -> Iterable[Path]:
        """Cgroups earlier runners of this run made beside ours (a killed runner's, left for its resume)."""
        if self.cgroup is None:
            return ()
        return self.cgroup.parent.glob(f"{cgroup_prefix(self.run_id, self.run_dir)}*")

    def _kill_strays(self, pids: Iterable[int], running: Mapping[str, object]) -> None:
        me = os.getpid()
        for pid in pids:
            if pid != me:
                self._kill_if_stray(pid, running)

    def _kill_if_stray(self, pid: int, running: Mapping[str, object]) -> None:
        if not self._is_stray(pid, running):
            return
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # gone
            return
        try:
            if self._is_stray(pid, running):  # still: the pidfd holds the very process it names
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        finally:
            os.close(pidfd)

    def _is_stray(self, pid: int, running: Mapping[str, object]) -> bool:
        node = self._node_of(pid)
        # A keeper carries the run's id, and DAGFLOW_NODE too when its runner is itself a node.
        return node is not None and node not in running and not is_keeper(pid, self.run_dir)

    def _node_of(self, pid: int) -> str | None:
        """The node of this run whose environment pid has. A run id is unique in its runs directory only:
        the run directory tells this run from another one of the same id."""
        env = dagflow_environment(pid)
        if env is None or env.get("DAGFLOW_RUN_ID") != self.run_id:
            return None
        run_dir = env.get("DAGFLOW_RUN_DIR")
        if run_dir is None or os.path.realpath(run_dir) != self._real_run_dir:
            return None
        return env.get("DAGFLOW_NODE")


def cgroup_prefix(run_id: str, run_dir: Path) -> str:
    """The start of the names of the cgroups of the run in run_dir (a runner's pid completes one): the
    run directory's hash tells it from a run of the same id in another runs directory."""
    digest = hashlib.sha256(os.fsencode(os.path.realpath(run_dir))).hexdigest()[:12]
    return f"dagflow-{run_id}-{digest}-"


def own_cgroup() -> Path | None:
    """This process's cgroup v2 directory, where the hierarchy is mounted here; None otherwise."""
    return _cgroup_dir(_read_text("/proc/self/cgroup"))


def _make_cgroup(name: str) -> Path | None:
    parent = own_cgroup()
    if parent is None:
        return None
    path = parent / name
    try:
        path.mkdir()
    except FileExistsError:  # an earlier runner of this run had this pid: what it left is this run's
        pass
    except OSError:  # not writable here (an undelegated cgroup, a read-only mount)
        return None
    return path


def _cgroup_dir(proc_cgroup: str | None) -> Path | None:
    """The directory of the cgroup v2 named in a /proc/<pid>/cgroup text, under its mount point."""
    if not proc_cgroup:
        return None
    path = next((line[3:] for line in proc_cgroup.splitlines() if line.startswith("0::")), None)
    if path is None or path.endswith(" (deleted)"):
        return None
    for root, mount_point in _cgroup2_mounts():
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return Path(mount_point, path[len(root) :].lstrip("/"))
    return None


def _cgroup2_mounts() -> list[tuple[str, str]]:
    """(root within the hierarchy, mount point) of each cgroup v2 mount, from /proc/self/mountinfo."""
    mounts = []
    for line in (_read_text("/proc/self/mountinfo") or "").splitlines():
        fields = line.split()
        if "-" in fields and fields[fields.index("-") + 1] == "cgroup2":
            mounts.append((_unescape(fields[3]), _unescape(fields[4])))
    return mounts


def _unescape(field: str) -> str:
    """mountinfo writes a space, tab, newline or backslash in a path as \\040, \\011, \\012, \\134."""
    for code in ("\\040", "\\011", "\\012", "\\134"):
        field = field.replace(code, chr(int(code[1:], 8)))
    return field


def _all_pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:  # no /proc: nothing can be found
        return []


def _members(cgroups: Iterable[Path], recursive: bool) -> list[int]:
    """The processes in cgroups (and, if recursive, in the cgroups below them)."""
    pids = []
    for cgroup in cgroups:
        places = (Path(root) for root, _, _ in os.walk(cgroup)) if recursive else (cgroup,)
        for place in places:
            pids += [int(pid) for pid in (_read_text(place / "cgroup.procs") or "").split()]
    return pids


def _kill_cgroup(cgroup: Path) -> None:
    """Kill everything in cgroup and below, and wait (within a limit) until it is empty."""
    try:
        _write(cgroup / "cgroup.kill", "1")
    except FileNotFoundError:  # a kernel before 5.14, or the cgroup is gone
        pass
    except OSError:
        return
    deadline = time.monotonic() + _EMPTY_WAIT_S
    while (pids := _members([cgroup], recursive=True)) and time.monotonic() < deadline:
        for pid in pids:  # without cgroup.kill; with it, the ones still dying
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def _remove(cgroup: Path) -> None:
    """Remove cgroup and the cgroups below it, deepest first (a cgroup that still holds a process stays)."""
    for root, _, _ in os.walk(cgroup, topdown=False):
        with contextlib.suppress(OSError):
            os.rmdir(root)


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read_text(path: str | Path) -> str | None:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return None
