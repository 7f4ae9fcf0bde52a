"""Requests learned from what past runs used: per step, cpus, memory, gpus, gpu_memory and timeout.

Each suggestion is the 95th percentile (nearest rank: a value at least 95% of the samples reached) of
what the step's node attempts used, plus a margin, rounded up to a sane unit:

- memory: peak RSS (HTCondor: MemoryUsage) + 20%, in steps of 128 MB up to 2 GB, 512 MB up to 16 GB,
  1 GB above;
- cpus: CPU time / wall time (cores busy on average), rounded up after forgiving 0.15 core of noise;
- gpu_memory: the GPU memory peak (NVML) + 10%, rounded as memory (it is a per-GPU minimum to place by);
- gpus: the count the runs asked for, or 0 when no attempt used its GPU at all;
- timeout: wall time x 1.5 (at least + 60 s), in whole minutes up to 1 h, 5 minutes up to 6 h, hours above.

Never below what failed for lack of it: an attempt recorded with reason "oom" (or held for memory) at X MB
(its peak or its request, whichever is higher) means at least X x the step's memory_growth (default 2);
one that timed out after T seconds means at least 2 T. Only attempts that ended on their own (no
reason recorded) are samples; killed, evicted or held attempts say nothing about what a whole run needs.

Records come from execute hosts and are untrusted: insane ones never get here (dagflow/run/usage.py),
and no sane one decides a request alone. A field is learned only from at least MIN_RECORDS records
(samples and failures together), and the highest of them counts for at most OUTLIER_FACTOR times the
next-highest, so one record claiming 60 GB beside others near 1 GB asks for at most 10 GB (+ margin).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from dagflow.run.resources.history import RunUsage, records_by_step
from dagflow.run.usage import HELD_PREFIX, REASON_OOM, REASON_TIMEOUT, NodeUsage

PERCENTILE = 95.0
MEMORY_MARGIN = 1.2
GPU_MEMORY_MARGIN = 1.1
TIME_MARGIN = 1.5
TIME_MIN_EXTRA_S = 60.0
CPU_NOISE = 0.15
DEFAULT_GROWTH = 2.0
TIMEOUT_GROWTH = 2.0
GPU_UNUSED_PCT = 1.0
FIELDS = ("cpus", "memory", "gpus", "gpu_memory", "timeout")
MIN_RECORDS = 2
OUTLIER_FACTOR = 10.0


@dataclass(frozen=True, slots=True)
class Evidence:
    runs: int  # runs that gave samples
    samples: int  # node attempts measured
    percentile: float | None  # the PERCENTILE-th percentile of the samples
    max: float | None
    failures: int  # attempts that failed for lack of this resource
    floor: float | None  # the least value those failures allow


@dataclass(frozen=True, slots=True)
class Suggestion:
    field: str  # one of FIELDS
    value: int | None  # None: nothing to go on
    unit: str  # "MB", "s" or "" (a count)
    evidence: Evidence
    why: str

    def as_yaml(self) -> str:
        """The value as a pipeline file would spell it."""
        if self.value is None:
            return "-"
        if self.unit == "MB":
            return f"{self.value // 1024}GB" if self.value % 1024 == 0 else f"{self.value}MB"
        if self.unit == "s":
            return duration_text(self.value)
        return str(self.value)


def percentile(values: Sequence[float], q: float = PERCENTILE) -> float:
    """Nearest-rank percentile: the smallest sample at least q% of the samples are at or below."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def round_memory_mb(mb: float) -> int:
    step = 128 if mb <= 2048 else 512 if mb <= 16384 else 1024
    return max(step, math.ceil(mb / step) * step)


def round_duration_s(seconds: float) -> int:
    step = 60 if seconds <= 3600 else 300 if seconds <= 6 * 3600 else 3600
    return max(step, math.ceil(seconds / step) * step)


def duration_text(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def suggest(history: Sequence[RunUsage], growth: Mapping[str, float] | None = None) -> dict[str, dict[str, Suggestion]]:
    """Per step seen in history: field -> Suggestion. `growth` is each step's memory_growth."""
    growth = growth or {}
    return {
        step: suggest_step(entries, growth.get(step, DEFAULT_GROWTH))
        for step, entries in records_by_step(history).items()
    }


def suggest_step(
    entries: Sequence[tuple[str, NodeUsage]], memory_growth: float = DEFAULT_GROWTH
) -> dict[str, Suggestion]:
    finished = [(run, r) for run, r in entries if r.reason is None]
    gpu_runs = [(run, r) for run, r in entries if r.requested.get("gpus", 0) > 0]
    out = {
        "cpus": _cpus(finished),
        "memory": _memory(finished, [r for _, r in entries if _out_of_memory(r)], memory_growth),
        "timeout": _timeout(finished, [r for _, r in entries if r.reason == REASON_TIMEOUT]),
    }
    if gpu_runs:
        out["gpus"] = _gpus(gpu_runs)
        out["gpu_memory"] = _gpu_memory([(run, r) for run, r in finished if r.requested.get("gpus", 0) > 0])
    return out


def _out_of_memory(record: NodeUsage) -> bool:
    reason = record.reason or ""
    return reason == REASON_OOM or (reason.startswith(HELD_PREFIX) and "memory" in reason.lower())


def _samples(
    entries: Iterable[tuple[str, NodeUsage]], value_of: Callable[[NodeUsage], float | None]
) -> tuple[list[float], int]:
    values, runs = [], set()
    for run, record in entries:
        value = value_of(record)
        if value is not None:
            values.append(float(value))
            runs.add(run)
    return values, len(runs)


def _evidence(
    values: list[float], runs: int, failures: int = 0, floor: float | None = None, raw: list[float] | None = None
) -> Evidence:
    """values: the samples as counted (capped); raw: as recorded, for the maximum shown."""
    shown = values if raw is None else raw
    return Evidence(
        runs=runs,
        samples=len(values),
        percentile=percentile(values) if values else None,
        max=max(shown) if shown else None,
        failures=failures,
        floor=floor,
    )


def _limit(values: list[float]) -> float | None:
    """The most any one record may count for: OUTLIER_FACTOR x the next-highest; None with fewer than
    MIN_RECORDS records (one record alone decides nothing)."""
    if len(values) < MIN_RECORDS:
        return None
    return sorted(values)[-2] * OUTLIER_FACTOR


def _capped(values: list[float], limit: float | None) -> list[float]:
    return values if limit is None else [min(value, limit) for value in values]


def _too_few(records: list[float], none: str) -> str:
    return f"{len(records)} record(s), at least {MIN_RECORDS} needed" if records else none


def _cap_note(records: list[float], limit: float | None, unit: str, digits: int = 0) -> str:
    if limit is None or max(records, default=0.0) <= limit:
        return ""
    return f"; highest record counted as {limit:.{digits}f}{unit} ({OUTLIER_FACTOR:g}x the next)"


def _with_failures(raw: list[float], runs: int, hits: list[float],
                   growth: float) -> tuple[float | None, list[float], Evidence, float | None]:
    """Finished (raw) and failed attempts' samples, capped: the limit, the samples, evidence, the failures' floor."""
    limit = _limit(raw + hits)
    values, hits = _capped(raw, limit), _capped(hits, limit)
    floor = max(hits) * growth if hits else None
    return limit, values, _evidence(values, runs, len(hits), floor, raw), floor


def _memory(finished: list[tuple[str, NodeUsage]], ooms: list[NodeUsage], growth: float) -> Suggestion:
    raw, runs = _samples(finished, lambda r: r.peak_memory_mb)
    hits = [max(r.peak_memory_mb or 0.0, r.requested.get("memory_mb", 0.0)) for r in ooms]
    limit, values, evidence, floor = _with_failures(raw, runs, hits, growth)
    if limit is None:
        return Suggestion("memory", None, "MB", evidence, _too_few(raw + hits, "no peak memory recorded"))
    wanted = (evidence.percentile or 0.0) * MEMORY_MARGIN
    why = f"p{PERCENTILE:g} {evidence.percentile:.0f} MB + {MEMORY_MARGIN - 1:.0%}" if values else ""
    if floor is not None and floor > wanted:
        wanted = floor
        why = f"{len(ooms)} attempt(s) ran out of memory: at least {floor:.0f} MB (x{growth:g})"
    return Suggestion("memory", round_memory_mb(wanted), "MB", evidence, why + _cap_note(raw, limit, " MB"))


def _cpus(finished: list[tuple[str, NodeUsage]]) -> Suggestion:
    def busy(record: NodeUsage) -> float | None:
        if record.cpu_s is None or not record.wall_s or record.wall_s <= 0:
            return None
        return record.cpu_s / record.wall_s

    raw, runs = _samples(finished, busy)
    limit = _limit(raw)
    evidence = _evidence(_capped(raw, limit), runs, raw=raw)
    if limit is None or evidence.percentile is None:
        return Suggestion("cpus", None, "", evidence, _too_few(raw, "no CPU time recorded"))
    cores = max(1, math.ceil(evidence.percentile - CPU_NOISE))
    why = f"p{PERCENTILE:g} {evidence.percentile:.2f} cores busy" + _cap_note(raw, limit, " cores", 2)
    return Suggestion("cpus", cores, "", evidence, why)


def _gpu_memory(finished: list[tuple[str, NodeUsage]]) -> Suggestion:
    raw, runs = _samples(finished, lambda r: r.gpu_memory_peak_mb)
    limit = _limit(raw)
    evidence = _evidence(_capped(raw, limit), runs, raw=raw)
    if limit is None or evidence.percentile is None:
        return Suggestion("gpu_memory", None, "MB", evidence, _too_few(raw, "no GPU memory recorded"))
    value = round_memory_mb(evidence.percentile * GPU_MEMORY_MARGIN)
    why = f"p{PERCENTILE:g} {evidence.percentile:.0f} MB + {GPU_MEMORY_MARGIN - 1:.0%}" + _cap_note(raw, limit, " MB")
    return Suggestion("gpu_memory", value, "MB", evidence, why)


def _gpus(gpu_entries: list[tuple[str, NodeUsage]]) -> Suggestion:
    asked, runs = _samples(gpu_entries, lambda r: r.requested.get("gpus"))
    used, _ = _samples(gpu_entries, lambda r: r.gpu_utilization_pct)
    evidence = _evidence(used, runs)
    count = int(max(asked))
    if used and max(used) < GPU_UNUSED_PCT:
        return Suggestion("gpus", 0, "", evidence, f"asked for {count}, but no attempt used its GPU")
    return Suggestion("gpus", count, "", evidence, f"as asked ({count})")


def _timeout(finished: list[tuple[str, NodeUsage]], timeouts: list[NodeUsage]) -> Suggestion:
    raw, runs = _samples(finished, lambda r: r.wall_s)
    hits = [r.wall_s or 0.0 for r in timeouts]
    limit, values, evidence, floor = _with_failures(raw, runs, hits, TIMEOUT_GROWTH)
    if limit is None:
        return Suggestion("timeout", None, "s", evidence, _too_few(raw + hits, "no wall time recorded"))
    p = evidence.percentile or 0.0
    wanted = max(p * TIME_MARGIN, p + TIME_MIN_EXTRA_S) if values else 0.0
    why = f"p{PERCENTILE:g} {p:.0f} s x{TIME_MARGIN:g}" if values else ""
    if floor is not None and floor > wanted:
        wanted = floor
        why = f"{len(timeouts)} attempt(s) timed out: at least {floor:.0f} s"
    return Suggestion("timeout", round_duration_s(wanted), "s", evidence, why + _cap_note(raw, limit, " s"))
