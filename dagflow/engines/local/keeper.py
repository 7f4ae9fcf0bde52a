"""The keeper: the process that starts a run's nodes, waits for them, and records their exits.

Run as `python -I -S keeper.py RUN_DIR` by the runner (procs.start_keeper), with RUN_DIR absolute and the
plan's workdir open as descriptor WORKDIR_FD: the keeper moves there as it starts, so the nodes it starts
run there (posix_spawn cannot change directory) while the runner's own directory stays where it was. It
is the parent of every node the runner starts, so it alone can collect their exit codes; it lives in its
own process group, so a kill of the runner (SIGKILL, OOM, a crash) or Ctrl-C in the runner's terminal
leaves it and the nodes running. It records each node's start and exit in `RUN_DIR/procs.jsonl` (one
line each; the lines of one turn of its loop in one write(2), with O_APPEND, before it tells the runner
of them), the way DAGMan's job log and Nextflow's `.exitcode` files do:

    {"n": node, "a": attempt, "pid": pid, "k": keeper pid}          started
    {"n": node, "a": attempt, "pid": pid, "rc": exit code,          exited (negative: killed by that signal)
     "w": wall s, "c": cpu s, "m": max rss KB, "t": unix time}      what it used, from wait4's rusage

so a runner that resumes the run adopts a node still running (and waits for it) and takes the result of
one that finished while no runner was alive (adoption.py, by recovery.py's rule).

Before its first node starts, the keeper forks: the process the runner started (its pid is the "k" of
the records) becomes the warden, a child subreaper (prctl(2)) that only waits, and the child goes on as
the keeper proper. If the keeper is killed (kill -9, the OOM killer) its running nodes become the
warden's children, and the warden records their exits as the keeper would have (`_ward`), so nothing a
node did is lost or done twice. If the warden is killed, the keeper goes on. Both hold
`keeper-PID.lock` locked while either lives: that is how a later runner knows an exit will still be
recorded. Only if both die is a running node's end unknowable: the next run kills and reruns it.
A node that writes to stdout or stderr after its keeper died ends with SIGPIPE (the keeper held the
reading ends): that is recorded as its exit, a failure, and it runs again. The keeper exits once the runner has closed
its request pipe (it finished, or died) and no node of its own is left. It imports nothing from dagflow
and starts in a few milliseconds.

Protocol, frames of a 4-byte little-endian length and a payload of fields separated by NUL bytes (no
field can hold one: exec(2) could not pass it), numbers in decimal:
  runner -> keeper (stdin):  s node attempt program argc argv... envc KEY=VALUE... after-node after-attempt
                                                                        start (no after: "" and 0)
                             | n node attempt                           start now
                             | d node attempt                           drop
  keeper -> runner (stdout): s node attempt pid | e node attempt error
                             | x node attempt rc wall-s cpu-s max-rss-KB unix-time
                             | d node attempt
request() and read_requests(), reply() and read_replies() write and read them; the environment
additions override the keeper's own environment (the runner's, when it started the keeper).
`after` is None (start now) or the (node, attempt) of a node this keeper started or holds: the new node
is its follower, started the moment it exits, in the slot it leaves, without waiting for the runner to
hear of the exit and answer (that round trip, per node, was most of the runner's overhead on DAGs of
short nodes). The runner picks a follower only among ready nodes that fit in what the leader holds, so
the keeper needs no resource accounting. "Start now" starts a follower still waiting (a slot freed
elsewhere first: the runner reserved it); for one already started it does nothing. A drop takes a
follower that has not started yet (and its own followers) out of the queue and answers "d"; a follower
already started is the runner's to kill. The keeper reads its requests again between a leader's exit
and its follower's start, so a drop written before the leader was signalled (Ctrl-C) is always honoured.
When the runner closes the request pipe, followers not yet started are forgotten: no runner would hear
of them.

The wall time runs from the start to the reap; CPU time and max RSS are the rusage wait4(2) returns for
the node's process (it includes the descendants that process waited for: usage_recorder.py).
A node's stdout and stderr are pipes the keeper reads into `logs/<node>.out|.err` (`_Output`), so a
node that prints keeps running when the runner dies (the keeper holds the pipes, not the runner).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import select
import signal
import struct
import sys
import time
from collections import deque
from collections.abc import Callable

try:  # what json.dumps does with a str, without the json package's import of re at every keeper's start
    from _json import encode_basestring_ascii as json_string
except ImportError:  # an interpreter without json's C accelerator
    from json import dumps as json_string

_HEADER = struct.Struct("<I")
WORKDIR_FD = 3  # the directory to run nodes in, as the runner passes it
# Signals a node gets back to their default dispositions (Python ignores SIGPIPE and SIGXFSZ; the keeper
# ignores SIGINT and SIGHUP, which only the runner acts on).
_NODE_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGHUP)
_STREAMS = (".out", ".err")
_READ_SIZE = 1 << 16
_WATCH_AFTER_S = 0.05


def _frame(fields: list[str]) -> bytes:
    payload = "\0".join(fields)
    if payload.count("\0") != len(fields) - 1:
        raise ValueError("embedded null byte")  # as exec(2) and os.posix_spawn refuse it
    data = os.fsencode(payload)  # once for the whole frame: the encoding works character by character
    return _HEADER.pack(len(data)) + data


def _unframe(buffer: bytearray) -> list[list[bytes]]:
    """Take the complete frames off the front of buffer, each as its fields."""
    messages = []
    offset = 0
    size = len(buffer)
    while size - offset >= 4:
        (length,) = _HEADER.unpack_from(buffer, offset)
        end = offset + 4 + length
        if end > size:
            break
        messages.append(bytes(buffer[offset + 4 : end]).split(b"\0"))
        offset = end
    del buffer[:offset]
    return messages


def request(kind: str, node: str, attempt: int, start: tuple | None = None) -> bytes:
    """A runner's request: kind "s" with start = (program, argv, env additions, after), "n" or "d"."""
    fields = [kind, node, str(attempt)]
    if start is not None:
        program, argv, env, after = start
        fields += [program, str(len(argv)), *argv, str(len(env))]
        fields += [f"{key}={value}" for key, value in env.items()]
        fields += [after[0], str(after[1])] if after else ["", "0"]
    return _frame(fields)


def read_requests(buffer: bytearray) -> list[tuple]:
    """The complete requests in buffer, as (kind, node, attempt, start or None)."""
    requests = []
    for fields in _unframe(buffer):
        kind, node, attempt = fields[0].decode(), os.fsdecode(fields[1]), int(fields[2])
        start = None
        if kind == "s":
            argc = int(fields[4])
            argv = fields[5 : 5 + argc]
            envc = int(fields[5 + argc])
            env = fields[6 + argc : 6 + argc + envc]
            after_node, after_attempt = fields[6 + argc + envc :]
            after = (os.fsdecode(after_node), int(after_attempt)) if after_node else None
            start = (fields[3], argv, env, after)
        requests.append((kind, node, attempt, start))
    return requests


CANNOT_START = "e"  # the kind of reply that says a node could not start, with the error

# An exit reply's rc, wall s, cpu s, max rss KB and unix time, each as repr() writes it.
_EXIT_FIELDS = b"\0%a\0%a\0%a\0%a\0%a"


def reply(kind: str, node: str, attempt: int, value: object = None) -> bytes:
    """A keeper's reply: "s" with the pid, "e" with an error, "x" with (rc, wall, cpu, max rss, time), "d"."""
    rest = b"" if value is None else b"\0" + os.fsencode(str(value))
    if kind == "x":
        rest = _EXIT_FIELDS % tuple(value)  # type: ignore[arg-type]
    return _reply(kind.encode(), _tag(node, attempt), rest)


def _tag(node: str, attempt: int) -> bytes:
    """The fields after its kind that every reply about one attempt of a node starts with."""
    return b"\0%s\0%d" % (os.fsencode(node), attempt)


def _reply(kind: bytes, tag: bytes, rest: bytes) -> bytes:
    """A reply frame. Its fields hold no NUL byte: the node name came in a request, and errors are text."""
    payload = kind + tag + rest
    return _HEADER.pack(len(payload)) + payload


def read_replies(buffer: bytearray) -> list[tuple]:
    """The complete replies in buffer, as (kind, node, attempt, value): the values reply() was given."""
    replies = []
    for fields in _unframe(buffer):
        kind, node, attempt = fields[0].decode(), os.fsdecode(fields[1]), int(fields[2])
        value: object = None
        if kind == "s":
            value = int(fields[3])
        elif kind == CANNOT_START:
            value = os.fsdecode(fields[3])
        elif kind == "x":
            rc, wall, cpu, maxrss, ended = fields[3:8]
            value = (int(rc), float(wall), float(cpu), int(maxrss), float(ended))
        replies.append((kind, node, attempt, value))
    return replies


class _Output:
    """A node's stdout and stderr: pipes the keeper reads, copied into `logs/<node>.out|.err`.

    A log file is created only once its stream says something: creating two files per node was the
    largest cost of running many short nodes, and a node that prints nothing leaves no file. A node's
    pipes are watched only once it has run `_WATCH_AFTER_S` (most nodes of a big DAG are short, and
    watching costs epoll calls and wakeups); a shorter node's output is read when it exits.
    """

    __slots__ = ("attempt", "logs", "prefix", "read_fds", "started", "watched")

    def __init__(self, prefix: str, attempt: int, started: float) -> None:
        self.prefix = prefix
        self.attempt = attempt
        self.started = started
        self.read_fds = [-1, -1]  # -1 once closed
        self.watched = False  # its open read_fds are registered with the keeper's epoll
        self.logs = [-1, -1]

    def pump(self, stream: int) -> bool:
        """Copy what is readable now from stream (0 stdout, 1 stderr); False once it has ended."""
        fd = self.read_fds[stream]
        if fd < 0:
            return False
        while True:
            try:
                data = os.read(fd, _READ_SIZE)
            except BlockingIOError:
                return True
            if not data:
                return False
            self._write(stream, data)

    def _write(self, stream: int, data: bytes) -> None:
        with contextlib.suppress(OSError):  # a full disk loses the log, not the run
            self._write_log(stream, data)

    def _write_log(self, stream: int, data: bytes) -> None:
        log = self.logs[stream]
        if log < 0:
            append = self.attempt > 1  # a retry adds to the earlier attempts' logs, after a banner
            flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_APPEND if append else os.O_TRUNC)
            log = self.logs[stream] = os.open(self.prefix + _STREAMS[stream], flags, 0o644)
            if append and os.fstat(log).st_size:
                data = f"\n=== dagflow: attempt {self.attempt} ===\n".encode() + data
        os.write(log, data)

    def close(self) -> None:
        """Copy what is left and close everything (after the node's process group is gone)."""
        for stream in (0, 1):
            with contextlib.suppress(OSError):  # a full disk loses the rest of the log, not the run
                self.pump(stream)
            for fds in (self.read_fds, self.logs):
                if fds[stream] >= 0:
                    os.close(fds[stream])
                    fds[stream] = -1


def _load_file_stem() -> Callable[[str], str]:
    """dagflow/files.py's `file_stem`, the one rule for node names as file names, loaded by its path: the
    keeper runs as a script (`python -I -S`) that cannot import dagflow."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "files.py")
    spec = importlib.util.spec_from_file_location("_dagflow_files", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.file_stem


file_stem = _load_file_stem()


class Keeper:
    def __init__(self, run_dir: str) -> None:
        self.logs = os.path.join(run_dir, "logs")
        self.procs_fd = os.open(
            os.path.join(run_dir, "procs.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644
        )
        self.env = dict(os.environb)
        self.devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        # pid -> (node, attempt, output, reply tag, record head): what its exit is told with
        self.children: dict[int, tuple[str, int, _Output, bytes, str]] = {}
        self.live: set[tuple[str, int]] = set()  # (node, attempt) of every started node not reaped yet
        self.followers: dict[tuple[str, int], tuple] = {}  # leader -> the start request waiting for it
        self.leaders: dict[tuple[str, int], tuple[str, int]] = {}  # waiting follower -> its leader
        self.unwatched: deque[tuple[int, _Output]] = deque()  # started nodes, oldest first
        self.requests = bytearray()
        self.replies: list[bytes] = []
        self.records: list[str] = []  # procs.jsonl lines not written yet
        self.runner_gone = False
        self.reading = True  # the request pipe is open
        self.pid = os.getpid()
        self.run_dir = run_dir
        # Held (flock) while this process or its warden lives: procs.keeper_alive asks it, not the pid.
        self.lock = os.open(os.path.join(run_dir, lock_name(self.pid)), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        self.warded = False  # whether the warden has been forked (before the first node starts)
        self.epoll = select.epoll()  # epoll directly: a selectors.Selector costs a few µs more per turn
        self.watching: dict[int, tuple[_Output, int]] = {}  # a watched node's read fd -> (output, stream)

    def run(self) -> None:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        os.set_blocking(wake_r, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        os.set_blocking(0, False)
        self.epoll.register(0, select.EPOLLIN)
        self.epoll.register(wake_r, select.EPOLLIN)
        while self.reading or self.children:
            timeout = None
            if self.unwatched:
                timeout = max(0.0, self.unwatched[0][1].started + _WATCH_AFTER_S - time.monotonic())
            for fd, _ in self.epoll.poll(timeout):
                if fd == 0:
                    self._read_requests()
                elif fd == wake_r:
                    _drain(wake_r)
                elif fd in self.watching:
                    self._pump(fd)
            self._reap()
            if self.unwatched:
                self._watch(time.monotonic())
            self._send()

    def _watch(self, now: float) -> None:
        unwatched = self.unwatched
        while unwatched and unwatched[0][1].started + _WATCH_AFTER_S <= now:
            pid, output = unwatched.popleft()
            if pid not in self.children:
                continue  # it has exited already
            for stream, fd in enumerate(output.read_fds):
                self.epoll.register(fd, select.EPOLLIN)
                self.watching[fd] = (output, stream)
            output.watched = True

    def _pump(self, fd: int) -> None:
        output, stream = self.watching[fd]
        if not output.pump(stream):
            self._unwatch(fd)
            output.read_fds[stream] = -1
            os.close(fd)

    def _unwatch(self, fd: int) -> None:
        self.epoll.unregister(fd)
        del self.watching[fd]

    def _read_requests(self) -> None:
        while True:
            try:
                chunk = os.read(0, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                self.runner_gone = True
                self.reading = False
                self.epoll.unregister(0)
                self.followers.clear()
                self.leaders.clear()
                return
            self.requests += chunk
        for kind, name, attempt, payload in read_requests(self.requests):
            if kind == "s":
                after = payload[3]
                if after is not None and (after in self.live or after in self.leaders):
                    self.followers[after] = (name, attempt, payload)
                    self.leaders[(name, attempt)] = after
                else:
                    self._start(name, attempt, payload)
            elif kind == "n":
                leader = self.leaders.pop((name, attempt), None)
                if leader is not None:
                    self._start(*self.followers.pop(leader))
            else:
                self._drop((name, attempt))

    def _start(self, name: str, attempt: int, payload: tuple) -> None:
        """Spawn a node; if it cannot start, its follower starts instead (it leaves its slot at once)."""
        while True:
            program, argv, env, _ = payload
            if self._spawn(name, attempt, program, argv, env):
                return
            follower = self._take_follower((name, attempt))
            if follower is None:
                return
            name, attempt, payload = follower

    def _take_follower(self, leader: tuple[str, int]) -> tuple | None:
        """The start request waiting for leader, out of the queue; None if there is none."""
        follower = self.followers.pop(leader, None)
        if follower is not None:
            del self.leaders[(follower[0], follower[1])]
        return follower

    def _drop(self, key: tuple[str, int]) -> None:
        leader = self.leaders.pop(key, None)
        if leader is None:
            return  # started already (or never asked for): the runner kills it once it hears of the start
        del self.followers[leader]
        while True:
            self.replies.append(reply("d", key[0], key[1]))
            follower = self._take_follower(key)
            if follower is None:
                return
            key = (follower[0], follower[1])

    def _spawn(self, name: str, attempt: int, program: bytes, argv: list[bytes], env_add: list[bytes]) -> bool:
        if not self.warded:
            self._fork_warden()
        env = self.env.copy()
        for item in env_add:
            key, _, value = item.partition(b"=")
            env[key] = value
        output = _Output(os.path.join(self.logs, file_stem(name)), attempt, time.monotonic())
        fds: list[int] = []
        try:
            fds += os.pipe()
            fds += os.pipe()
            actions = [
                (os.POSIX_SPAWN_DUP2, self.devnull, 0),
                (os.POSIX_SPAWN_DUP2, fds[1], 1),
                (os.POSIX_SPAWN_DUP2, fds[3], 2),
            ]
            pid = os.posix_spawn(program, argv, env, file_actions=actions, setpgroup=0, setsigdef=_NODE_DEFAULT_SIGNALS)
        except OSError as error:
            for fd in fds:
                os.close(fd)
            self.replies.append(reply(CANNOT_START, name, attempt, error.strerror or str(error)))
            return False
        os.close(fds[1])
        os.close(fds[3])
        os.set_blocking(fds[0], False)
        os.set_blocking(fds[2], False)
        output.read_fds = [fds[0], fds[2]]
        tag, head = _tag(name, attempt), f'{{"n":{json_string(name)},"a":{attempt},"pid":{pid}'
        self.children[pid] = (name, attempt, output, tag, head)
        self.live.add((name, attempt))
        self.unwatched.append((pid, output))
        self.records.append(f'{head},"k":{self.pid}}}\n')
        self.replies.append(_reply(b"s", tag, b"\0%d" % pid))
        return True

    def _fork_warden(self) -> None:
        """Split in two before the first node starts (the runner has put this process in the run's cgroup
        by then): this process, the pid the runner and procs.jsonl know, becomes the warden and waits;
        its child goes on as the keeper proper, parent of the nodes."""
        self.warded = True
        if not _become_subreaper():
            return  # not Linux: no warden, a killed keeper's nodes are found lost and run again
        try:
            keeper = os.fork()
        except OSError:
            return
        if keeper == 0:
            return
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (0, 1, self.devnull, self.epoll.fileno()):
            with contextlib.suppress(OSError):
                os.close(fd)
        os._exit(_ward(keeper, self.pid, self.run_dir, self.procs_fd))

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            entry = self.children.pop(pid, None)
            if entry is None:
                continue
            name, attempt, output, tag, head = entry
            rc = os.waitstatus_to_exitcode(status)
            wall = time.monotonic() - output.started
            cpu = usage.ru_utime + usage.ru_stime
            ended = time.time()
            # Whatever the node left behind in its process group goes with it, as under HTCondor.
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            if output.watched:
                for fd in output.read_fds:
                    if fd >= 0:
                        self._unwatch(fd)
            output.close()
            self.records.append(exit_record(head, rc, wall, cpu, usage.ru_maxrss, ended))
            self.replies.append(_reply(b"x", tag, _EXIT_FIELDS % (rc, wall, cpu, usage.ru_maxrss, ended)))
            self.live.discard((name, attempt))
            if self.reading and (name, attempt) in self.followers:
                # The runner writes a drop before it signals a leader: read it before starting the follower.
                self._read_requests()
            follower = self._take_follower((name, attempt))
            if follower is not None:
                self._start(*follower)

    def _send(self) -> None:
        if self.records:  # one write for this turn's records, always before the replies that tell of them
            data = "".join(self.records).encode()
            self.records.clear()
            # On a full disk the runner still hears of it; only a later adoption cannot.
            with contextlib.suppress(OSError):
                os.write(self.procs_fd, data)
        if not self.replies:
            return
        data = b"".join(self.replies)
        self.replies.clear()
        if self.runner_gone:
            return
        try:
            while data:
                data = data[os.write(1, data) :]
        except OSError:  # the runner died (EPIPE): the procs log is what a resume reads
            self.runner_gone = True


def lock_name(pid: int) -> str:
    """The file in the run directory that keeper pid and its warden hold locked while either lives."""
    return f"keeper-{pid}.lock"


def exit_record(head: str, rc: int, wall: float, cpu: float, maxrss: int, ended: float) -> str:
    return f'{head},"rc":{rc},"w":{wall:.3f},"c":{cpu:.3f},"m":{maxrss},"t":{ended:.3f}}}\n'


def _become_subreaper() -> bool:
    """prctl(PR_SET_CHILD_SUBREAPER): the nodes of a keeper that dies become this process's children."""
    try:
        import ctypes  # only here: the keeper's own start stays a few milliseconds

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # 36: PR_SET_CHILD_SUBREAPER (linux/prctl.h)
    except (OSError, AttributeError):
        return False


def _ward(keeper: int, pid: int, run_dir: str, procs_fd: int) -> int:
    """The warden's life: wait for the keeper; if it dies with nodes still running (kill -9, the OOM
    killer), they become the warden's children (it is their subreaper), and it records their exits in
    procs.jsonl as the keeper would have, so a resume takes their results instead of running them again.
    Orphans of nodes (daemons) that come to it meanwhile are reaped and ignored."""
    lock = os.path.join(run_dir, lock_name(pid))
    while True:
        try:
            child, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        if child == keeper:
            break
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        held = {}  # it ended as it should: after its last node
    else:
        held = {
            node: head
            for node, head in _unrecorded_starts(os.path.join(run_dir, "procs.jsonl"), pid).items()
            if _is_child(node)
        }
    started = {node: _start_time(node) for node in held}
    taken_over = time.time()
    while held:
        try:
            child, status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            break  # the rest were reaped by the keeper before it died, or never were ours
        head = held.pop(child, None)
        if head is None:
            continue
        with contextlib.suppress(OSError):
            os.killpg(child, signal.SIGKILL)  # what the node left in its group goes with it, as in _reap
        ended = time.time()
        wall = ended - (started[child] or taken_over)
        record = exit_record(
            head, os.waitstatus_to_exitcode(status), wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, ended
        )
        with contextlib.suppress(OSError):
            os.write(procs_fd, record.encode())
    with contextlib.suppress(OSError):
        os.unlink(lock)
    return 0


def _unrecorded_starts(procs: str, keeper: int) -> dict[int, str]:
    """pid -> record head of each node keeper started and recorded no exit of."""
    import json  # only here: a warden whose keeper died reads the records

    heads: dict[int, str] = {}
    try:
        with open(procs, "rb") as handle:
            lines = handle.read().split(b"\n")
    except OSError:
        return heads
    for line in lines:
        try:
            event = json.loads(line)
            name, attempt, node = event["n"], event["a"], event["pid"]
        except (ValueError, KeyError, TypeError):
            continue
        if "rc" in event:
            heads.pop(node, None)
        elif event.get("k") == keeper:
            heads[node] = f'{{"n":{json_string(name)},"a":{attempt},"pid":{node}'
    return heads


def _is_child(pid: int) -> bool:
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _start_time(pid: int) -> float | None:
    """When process pid started, in unix time (from /proc), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
        with open("/proc/stat", "rb") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith(b"btime "))
        ticks = int(stat[stat.rfind(b")") + 2 :].split()[19])  # field 22, starttime
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _drain(fd: int) -> None:
    """Empty the wakeup pipe (a byte per signal): whatever a read leaves wakes the next select at once."""
    with contextlib.suppress(BlockingIOError):  # nothing there: another turn emptied it
        os.read(fd, 4096)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    os.fchdir(WORKDIR_FD)
    os.close(WORKDIR_FD)
    Keeper(sys.argv[1]).run()


if __name__ == "__main__":
    main()
