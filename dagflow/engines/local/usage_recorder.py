"""What the local runner records in usage.jsonl for each node attempt that ran.

The keeper measures each node when it reaps it with wait4(2) (keeper.py): wall time from the request to
start it until its exit, CPU time (user + system) and peak memory (ru_maxrss) from the rusage of the
node's process, which Linux accumulates over the descendants it waited for: a shell's commands count,
a background process the node never waited for does not (it is killed with the node's process group
at exit). ru_maxrss is the largest resident set of one process of that tree, not the sum over its
processes, and never below the keeper's own (the node starts as a vfork of the keeper: a few MB).
The keeper puts the numbers in the node's exit record in procs.jsonl and in its reply, so an exit a
runner missed (it was killed) is measured all the same when the next runner takes it over.

The runner adds GPU memory and utilisation (gpu_sampler.py), the request, host and slot, and writes
the records of each turn of its loop with one write, before that turn's journal events: a node whose
end is journaled has its usage record written. A record written by a runner that died before
journaling the end is written again by the runner that takes the exit over; both carry the same
`key` (keeper pid and node pid), which the reader collapses.
"""

from __future__ import annotations

import errno
import heapq
import json
import math
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from dagflow.engines.local.gpu_sampler import GpuSampler, GpuStats
from dagflow.plan import Resources
from dagflow.run.usage import (
    REASON_KILLED,
    REASON_OOM,
    REASON_TIMEOUT,
    oom_kills,
    requested_of,
    usage_path,
)

KB_PER_MB = 1024


@dataclass(frozen=True, slots=True)
class Measured:
    """What the keeper measured of one node process."""

    wall_s: float
    cpu_s: float
    maxrss_kb: int
    ended: float  # unix seconds

    @classmethod
    def of(cls, recorded: tuple[float, float, int, float] | None) -> Measured | None:
        return None if recorded is None else cls(*recorded)

    @classmethod
    def from_reply(cls, value: object) -> Measured | None:
        if isinstance(value, tuple) and len(value) == 5:
            _, wall, cpu, maxrss, ended = value
            return cls(wall, cpu, maxrss, ended)
        return None


class UsageRecorder:
    """Builds a run's usage records and appends them, one write per `flush()`."""

    def __init__(self, run_dir: Path, sampler: GpuSampler, slots: int) -> None:
        self.path = usage_path(run_dir)
        self.sampler = sampler
        self.host = os.uname().nodename
        self._host_json = _json(self.host)
        self._requested: dict[Resources, str] = {}
        self._pending: list[bytes] = []
        self._free_slots = list(range(1, max(1, slots) + 1))
        self._slots: dict[str, int] = {}
        self._oom_kills = oom_kills()
        self._fd = -1

    def started(self, node: str, devices: tuple[str, ...], pid: int | None) -> None:
        """A node holds a slot (numbered from 1, the lowest free one) and, with GPUs, is sampled."""
        if node not in self._slots:
            self._slots[node] = heapq.heappop(self._free_slots) if self._free_slots else len(self._slots) + 1
        self.sampler.watch(node, devices, pid)

    def pid_known(self, node: str, pid: int) -> None:
        self.sampler.set_pgid(node, pid)

    def finished(
        self,
        node: str,
        step: str,
        attempt: int,
        resources: Resources,
        devices: tuple[str, ...],
        measured: Measured | None,
        key: str | None,
        rc: int,
        kill_reason: str | None,
    ) -> None:
        """Queue the record of a node attempt that ran (measured None: its numbers were lost); an
        attempt that never started (key None) frees its slot and gets no record."""
        slot = self._slots.pop(node, None)
        if slot is not None:
            heapq.heappush(self._free_slots, slot)
        gpu = self.sampler.finish(node) or GpuStats()
        if key is None:
            return
        allocated = f'{{"gpus":{len(devices)}}}' if devices else "{}"
        extra: dict[str, float | str] = {"gpu_devices": ",".join(devices)} if devices else {}
        if rc < 0:
            extra["signal"] = _signal_name(-rc)
        started = ended = wall = cpu = peak = None
        if measured is not None:
            wall, cpu, ended = round(measured.wall_s, 3), round(measured.cpu_s, 3), round(measured.ended, 3)
            started = round(measured.ended - measured.wall_s, 3)
            peak = round(measured.maxrss_kb / KB_PER_MB, 1)
        gpu_memory = None if gpu.memory_peak_mb is None else round(gpu.memory_peak_mb, 1)
        gpu_utilization = None if gpu.utilization_pct is None else round(gpu.utilization_pct, 1)
        requested = self._requested.get(resources)
        if requested is None:
            requested = self._requested[resources] = _json(requested_of(resources))
        reason = self._reason(rc, kill_reason)
        # The line encode_usage(NodeUsage(...)) writes, made directly: this runs once per node of a big
        # run, and building the record and encoding it generically cost several times more (the tests
        # check the two agree).
        self._pending.append(
            f'{{"node":{_json(node)},"step":{_json(step)},"attempt":{attempt},"engine":"local",'
            f'"started":{_number(started)},"ended":{_number(ended)},"wall_s":{_number(wall)},'
            f'"cpu_s":{_number(cpu)},"peak_memory_mb":{_number(peak)},"gpu_memory_peak_mb":{_number(gpu_memory)},'
            f'"gpu_utilization_pct":{_number(gpu_utilization)},"host":{self._host_json},'
            f'"slot":{"null" if slot is None else _json(str(slot))},"requested":{requested},'
            f'"allocated":{allocated},"exit_code":{rc},"reason":{"null" if reason is None else _json(reason)},'
            f'"extra":{_json(extra) if extra else "{}"},"key":{_json(key)}}}\n'.encode()
        )

    def _reason(self, rc: int, kill_reason: str | None) -> str | None:
        if kill_reason == "timeout":
            return REASON_TIMEOUT
        if kill_reason == "oom":  # the runner killed it over its memory limit (memory_limit.py)
            return REASON_OOM
        if kill_reason is not None:
            return REASON_KILLED
        if rc != -signal.SIGKILL:
            return REASON_KILLED if rc < 0 else None
        # A SIGKILL dagflow did not send: the kernel's OOM killer, when its count of kills went up since.
        kills = oom_kills()
        seen, self._oom_kills = self._oom_kills, kills
        return REASON_OOM if kills is not None and seen is not None and kills > seen else REASON_KILLED

    def flush(self) -> None:
        """Append the queued records with one write (before the journal commits the turn's ends)."""
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            size = os.fstat(self._fd).st_size
            if size and os.pread(self._fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # end a torn line a killed runner left
        written = os.write(self._fd, data)
        if written != len(data):  # a full disk: the runner stops as for the journal; readers skip the torn line
            raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (usage record cut short)")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self.sampler.reader is not None:
            self.sampler.reader.close()


def attempt_key(keeper: int | None, pid: int | None) -> str | None:
    return None if pid is None else f"{keeper or 0}.{pid}"


_json = json.JSONEncoder(separators=(",", ":")).encode


def _number(value: float | None) -> str:
    return "null" if value is None or not math.isfinite(value) else repr(value)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
