"""What each node attempt used: `usage.jsonl` in the run dir, one JSON object per finished node attempt.

Every engine writes here: the local keeper when it reaps a node (wait4's rusage), the batch node
wrapper on Slurm / Grid Engine (the run dir is shared with the execute hosts), and `dagflow status` /
the waiting runner on HTCondor when it reads a node's terminated event. A record is one line holding
the `NodeUsage` fields by name, e.g.

    {"node": "train[lr=0.1]", "step": "train", "attempt": 1, "engine": "local", "started": 1764...,
     "ended": 1764..., "wall_s": 12.5, "cpu_s": 11.9, "peak_memory_mb": 812.3, ...,
     "requested": {"cpus": 2, "memory_mb": 2048}, "allocated": {}, "exit_code": 0, "reason": null,
     "extra": {}, "key": null}

Durability: a record is appended with one write(2) on an O_APPEND descriptor, so concurrent writers
(the keeper, many batch wrappers, concurrent `dagflow status`) never interleave within a line on a
local file system, nor on a shared one whose appends are atomic (a bind mount of one kernel, as on the
test clusters; NFS appends from several clients are not). Records are not fsync'ed: usage is an
observation, and a crash of the machine loses at most the last records, never the run. A writer killed
mid-line leaves a torn line: the reader skips any line that is not a well-formed record, and the next
writer first ends the torn line with a newline so its own record stays whole.

Attempts an engine may observe more than once (HTCondor's event log is read by every `status`) carry
`key`, the engine's id of that attempt (the condor cluster id): the reader keeps only the first record
of a (node, key), and `record_usages_once` does not append one whose (node, key) is already there.

Records are untrusted (execute hosts write them): a line whose numbers are not a sane measurement (NaN
or an infinity, a negative amount, a wall time past a year, memory past MAX_MEMORY_MB, more than
MAX_CORES cores busy on average) is not a record; `read_usage_checked` says which lines were skipped
and why.

Optional fields may be added later (with a default, read as that default from older files); none is
ever renamed. Unknown fields in a line are ignored, so older readers read newer files.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
from collections.abc import Container, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagflow.bounded import BoundedInputError, loads_json

if TYPE_CHECKING:
    from dagflow.plan import Resources

USAGE_FILE = "usage.jsonl"
WRITE_BYTES = 1 << 22  # record_lines_once's writes

REASON_OOM = "oom"
REASON_TIMEOUT = "timeout"
REASON_EVICTED = "evicted"
REASON_KILLED = "killed"
HELD_PREFIX = "held: "

# What a sane record can hold: every number is finite and at least 0, and at most these.
MAX_SECONDS = 366 * 86400  # one attempt's wall time
MAX_CORES = 4096  # cores busy on average (cpu_s / wall_s), and cpus or gpus asked for
MAX_MEMORY_MB = 2**26  # 64 TiB, more than any one machine has
MAX_UNIX_TIME = 2**33  # the year 2242
_LIMITS = {
    "started": MAX_UNIX_TIME, "ended": MAX_UNIX_TIME, "wall_s": MAX_SECONDS, "cpu_s": MAX_SECONDS * MAX_CORES,
    "peak_memory_mb": MAX_MEMORY_MB, "gpu_memory_peak_mb": MAX_MEMORY_MB, "gpu_utilization_pct": 100,
}  # fmt: skip
_REQUEST_LIMITS = {"cpus": MAX_CORES, "gpus": MAX_CORES, "memory_mb": MAX_MEMORY_MB, "gpu_memory_mb": MAX_MEMORY_MB}


@dataclass(frozen=True, slots=True)
class NodeUsage:
    node: str
    step: str
    attempt: int  # 1-based
    engine: str  # local | condor | slurm | sge
    started: float | None  # unix seconds
    ended: float | None
    wall_s: float | None
    cpu_s: float | None  # user + system
    peak_memory_mb: float | None  # max RSS (local: wait4 ru_maxrss) / MemoryUsage (condor)
    gpu_memory_peak_mb: float | None  # NVML, sampled; None where no GPU
    gpu_utilization_pct: float | None  # mean of samples
    host: str | None  # machine (condor: slot@host / RemoteHost)
    slot: str | None
    requested: dict[str, float]  # cpus, memory_mb, disk_mb, gpus, gpu_memory_mb (what the plan asked)
    allocated: dict[str, float]  # what the engine gave, where it says (condor's Allocated column)
    exit_code: int | None
    reason: str | None  # None, or "oom" | "timeout" | "evicted" | "held: <reason>" | "killed"
    extra: dict[str, float | str] = field(default_factory=dict)  # engine-specific extras
    key: str | None = None  # the engine's id of this attempt (condor cluster id); see the module doc


def requested_of(resources: Resources) -> dict[str, float]:
    """A plan's resource request in `requested`'s keys (gpu_memory_mb only when the step sets one)."""
    requested: dict[str, float] = {
        "cpus": resources.cpus,
        "memory_mb": resources.memory_mb,
        "disk_mb": resources.disk_mb,
        "gpus": resources.gpus,
    }
    if resources.gpu_memory_mb is not None:
        requested["gpu_memory_mb"] = resources.gpu_memory_mb
    return requested


_FIELD_NAMES = tuple(spec.name for spec in fields(NodeUsage))
_DICT_FIELDS = ("requested", "allocated", "extra")
_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def usage_path(run_dir: Path) -> Path:
    return Path(run_dir) / USAGE_FILE


def usage_dict(usage: NodeUsage) -> dict[str, Any]:
    """The record's fields by name (its dicts copied); dataclasses.asdict, without its deep copies' cost."""
    values = {name: getattr(usage, name) for name in _FIELD_NAMES}
    for name in _DICT_FIELDS:
        values[name] = dict(values[name])
    return values


def encode_usage(usage: NodeUsage) -> bytes:
    """One record as its line, newline included. Non-finite floats become null (JSON has none)."""
    values = {name: getattr(usage, name) for name in _FIELD_NAMES}
    try:
        return (_encode(values) + "\n").encode()
    except ValueError:  # a NaN or an infinity somewhere
        return (_encode(_finite(values)) + "\n").encode()


def decode_usage(obj: Any) -> NodeUsage:
    """A record from a parsed JSON line; raises ValueError when it is not a well-formed record. (Exact types:
    JSON gives no subclass, and `type(x) in` is what keeps a big run's status fast; bool is not a number.)"""
    if type(obj) is not dict:
        raise ValueError("not an object")
    get = obj.get
    values: dict[str, Any] = {}
    for name, kind, high in _FIELD_SPECS:
        value = get(name)
        if kind is float:
            if value is not None:
                if type(value) not in _NUMBER_TYPES:
                    raise ValueError(f"{name} is not a number")
                value = float(value)
                if not 0 <= value <= high:  # NaN fails too
                    _sane(name, value, high)
        elif kind is _STR_REQUIRED:
            if type(value) is not str:
                raise ValueError(f"{name} is not a string")
        elif kind is str:
            if value is not None and type(value) is not str:
                raise ValueError(f"{name} is not a string")
        elif kind is _NUMBER_DICT:
            value = _number_dict(name, value, allow_str=False)
            if name == "requested":
                for key, item in value.items():
                    _sane(f"requested[{key!r}]", item, _REQUEST_LIMITS.get(key, math.inf))
        elif kind is _EXTRA_DICT:
            value = _number_dict(name, value, allow_str=True)
        elif kind is _INT_REQUIRED:
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} is not a positive integer")
        elif value is not None and type(value) is not int:  # kind int: an optional integer
            raise ValueError(f"{name} is not an integer")
        values[name] = value
    _sane_cores(values["cpu_s"], values["wall_s"])
    return NodeUsage(**values)


def record_usage(run_dir: Path, usage: NodeUsage) -> None:
    """Append one record to the run's usage.jsonl with one write(2)."""
    _append(usage_path(run_dir), encode_usage(usage))


def record_usages_once(run_dir: Path, usages: Iterable[NodeUsage]) -> int:
    """Append those of `usages` whose (node, key) has no record yet (record_lines_once); how many.

    For engines whose attempts are observed repeatedly (condor): every record must have a `key`. Writers
    on this host are serialized by an flock on the file; the reader's deduplication covers any others.
    """
    usages = list(usages)
    if any(usage.key is None for usage in usages):
        raise ValueError("record_usages_once needs usage records with a key")
    return record_lines_once(run_dir, ((usage.node, usage.key or "", encode_usage(usage)) for usage in usages))


def renumber_line(line: bytes, attempt: int) -> bytes:
    """encode_usage's line of a record, numbered `attempt` instead (the rest of the line unchanged: JSON
    gives back its fields in order, and its numbers as they were)."""
    values = json.loads(line)
    values["attempt"] = attempt
    return (_encode(values) + "\n").encode()


def record_lines_once(run_dir: Path, lines: Iterable[tuple[str, str, bytes]]) -> int:
    """record_usages_once of records already encoded: (node, key, encode_usage's line) each, appended in
    writes of about WRITE_BYTES under the lock (a big run's 50 MB are not copied into one); how many."""
    lines = list(lines)
    if not lines:
        return 0
    fd = os.open(usage_path(run_dir), os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        nodes = {node for node, _, _ in lines}
        seen = {(r.node, r.key) for r in _parse(_read_all(fd), nodes)[0] if r.key is not None}
        batch: list[bytes] = []
        size = appended = 0
        for node, key, text in lines:
            if (node, key) in seen:
                continue
            seen.add((node, key))
            batch.append(text)
            size += len(text)
            appended += 1
            if size >= WRITE_BYTES:
                _write_line(fd, b"".join(batch))
                batch, size = [], 0
        if batch:
            _write_line(fd, b"".join(batch))
        return appended
    finally:
        os.close(fd)


def read_usage(run_dir: Path, nodes: Container[str] | None = None) -> list[NodeUsage]:
    """All attempts' records, in file order; a missing file is no records. Lines that are not a
    well-formed, sane record (a torn tail) are skipped; a repeated (node, key) keeps its first record.
    nodes: only the records of these nodes (the lines of others, told by their start, are not decoded)."""
    if nodes is None:
        return read_usage_checked(run_dir)[0]
    try:
        data = usage_path(run_dir).read_bytes()
    except FileNotFoundError:
        return []
    return _parse(data, nodes)[0]


def read_usage_checked(run_dir: Path) -> tuple[list[NodeUsage], list[tuple[int, str]]]:
    """read_usage's records, and (line number, why) of each line it skipped as not a record."""
    try:
        data = usage_path(run_dir).read_bytes()
    except FileNotFoundError:
        return [], []
    return _parse(data)


def latest_by_node(records: Iterable[NodeUsage]) -> dict[str, NodeUsage]:
    """Each node's latest attempt: the highest attempt number, the later record among equals."""
    latest: dict[str, NodeUsage] = {}
    for record in records:
        seen = latest.get(record.node)
        if seen is None or record.attempt >= seen.attempt:
            latest[record.node] = record
    return latest


# How encode_usage starts a line: the node's name (one with no quote or escape in it) first.
_NODE_PREFIX = re.compile(rb'\{"node":"([^"\\]*)",')


def _parse(data: bytes, nodes: Container[str] | None = None) -> tuple[list[NodeUsage], list[tuple[int, str]]]:
    records: list[NodeUsage] = []
    skipped: list[tuple[int, str]] = []
    seen_keys: set[tuple[str, str]] = set()
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        prefix = _NODE_PREFIX.match(line) if nodes is not None else None
        if prefix is not None and prefix.group(1).decode("utf-8", "replace") not in nodes:  # type: ignore[operator]
            continue  # another node's record (a line not in this form is decoded, to read its node)
        try:
            parsed = loads_json(line)
        except BoundedInputError as error:
            skipped.append((number, str(error)))
            continue
        try:
            record = decode_usage(parsed)
        except ValueError as error:
            skipped.append((number, str(error)))
            continue
        if nodes is not None and record.node not in nodes:
            continue
        if record.key is not None:
            ident = (record.node, record.key)
            if ident in seen_keys:
                continue
            seen_keys.add(ident)
        records.append(record)
    return records, skipped


def _append(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        _write_line(fd, data)
    finally:
        os.close(fd)


def _write_line(fd: int, data: bytes) -> None:
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        data = b"\n" + data  # end a torn line left by a killed writer, so this record stays whole
    written = os.write(fd, data)
    if written != len(data):  # a full disk: the short line is skipped by readers and ended by the next writer
        raise OSError(f"usage record cut short ({written} of {len(data)} bytes)")


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks: list[bytes] = []
    offset = 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


_STR_REQUIRED = object()
_INT_REQUIRED = object()
_NUMBER_DICT = object()
_EXTRA_DICT = object()
_FIELD_KINDS: dict[str, Any] = {
    "node": _STR_REQUIRED,
    "step": _STR_REQUIRED,
    "attempt": _INT_REQUIRED,
    "engine": _STR_REQUIRED,
    "started": float,
    "ended": float,
    "wall_s": float,
    "cpu_s": float,
    "peak_memory_mb": float,
    "gpu_memory_peak_mb": float,
    "gpu_utilization_pct": float,
    "host": str,
    "slot": str,
    "requested": _NUMBER_DICT,
    "allocated": _NUMBER_DICT,
    "exit_code": int,
    "reason": str,
    "extra": _EXTRA_DICT,
    "key": str,
}
_NUMBER_TYPES = frozenset({int, float})
# (field, its kind, its upper bound where it is a number), in the record's order
_FIELD_SPECS = tuple((name, _FIELD_KINDS[name], _LIMITS.get(name, math.inf)) for name in _FIELD_NAMES)


def _number_dict(name: str, value: Any, allow_str: bool) -> dict[str, Any]:
    if value is None:
        return {}
    if type(value) is not dict:
        raise ValueError(f"{name} is not an object")
    out: dict[str, Any] = {}
    for key, item in value.items():
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):
                raise ValueError(f"{name}[{key!r}] is {item:g}, not a finite number")
            out[key] = item
        elif kind is int or (allow_str and kind is str):
            out[key] = item
        elif item is None:
            continue
        else:
            raise ValueError(f"{name}[{key!r}] is not a number")
    return out


def _sane(name: str, value: float, high: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{name} is {value:g}, not a finite number")
    if not 0 <= value <= high:
        raise ValueError(f"{name} is {value:g}, out of range (0 to {high:.0f})")
    return value


def _sane_cores(cpu_s: float | None, wall_s: float | None) -> None:
    """CPU time no machine could spend in the wall time (a tiny wall time beside a large CPU time)."""
    if cpu_s is not None and wall_s and cpu_s > wall_s * MAX_CORES:
        cores = cpu_s / wall_s
        raise ValueError(f"cpu_s {cpu_s:g} in wall_s {wall_s:g} is {cores:.0f} cores busy (at most {MAX_CORES})")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    return value


def oom_kills() -> int | None:
    """Evidence for REASON_OOM where the engine reaps the node itself: the kernel's count of OOM kills
    (/proc/vmstat `oom_kill`, Linux 4.13+); None where unknown."""
    try:
        with open("/proc/vmstat", "rb") as vmstat:
            for line in vmstat:
                if line.startswith(b"oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None
