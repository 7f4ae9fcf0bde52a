"""Whether a job could ever run in the pool, or only waits for busy slots: the one rule behind an idle
node's reason (idle_reasons.py) and `dagflow submit`'s warning before queueing (submit_check.py).

A slot ad says what is free now: a partitionable slot whose GPUs run other jobs offers none of them
(`AvailableGPUs = { }`), so `condor_q -better-analyze` finds no GPU that matches even where the pool has
the right ones, only busy. The rule asks the job's own Requirements (as condor_submit builds them) of
each machine whole: a partitionable or static slot's ad with all of its resources (TotalSlotCpus,
TotalSlotMemory, TotalSlotDisk, TotalSlotGPUs) and every GPU it advertises (GPUs_GPU_<id>) available.
No machine whole matches: it never runs there. One does: it runs once that machine's slots are free.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterable

import classad2

QUERY_TIMEOUT_S = 30.0
_GPU_AD = re.compile(r"GPUs_GPU_\w+")
_WHOLE = ("Cpus", "Memory", "Disk", "GPUs")
ACCESS_POINT_UNIVERSES = (7, 12)  # JobUniverse of the scheduler and local universes: never matchmade

Runner = Callable[[list[str]], str | None]


def run_tool(argv: list[str], stdin: str | None = None) -> str | None:
    """A condor tool's output, or None where it cannot run or fails (a status or a warning must not)."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S,
                              check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def parse_ads(text: str) -> list[classad2.ClassAd]:
    """The ads in `-long` output (condor_status, condor_q, condor_submit -dry-run), blank-line separated;
    lines that are no `Name = value` (condor_submit's `Dry-Run job(s)` heading) are left out."""
    kept = "\n".join(line for line in text.splitlines() if "=" in line or not line.strip())
    try:
        return list(classad2.parseAds(kept, classad2.ParserType.Old))
    except (ValueError, RuntimeError, classad2.ClassAdException):
        return []


def machines_argv(pool: str | None) -> list[str]:
    """The slots that stand for whole machines: partitionable and static ones, not their dynamic slots."""
    argv = ["condor_status", "-long", "-constraint", 'SlotType =!= "Dynamic"']
    return [*argv, "-pool", pool] if pool else argv


def whole_machines(slots: Iterable[classad2.ClassAd]) -> list[classad2.ClassAd]:
    """Each slot's ad as if nothing ran there: all its resources and GPUs free (the module docstring)."""
    machines = []
    for slot in slots:
        if slot.get("SlotType") == "Dynamic":
            continue
        whole = classad2.ClassAd()
        for key in slot:
            whole[key] = slot.lookup(key)
        for resource in _WHOLE:
            if f"TotalSlot{resource}" in slot:
                whole[resource] = slot.lookup(f"TotalSlot{resource}")
        gpus = sorted(key for key in slot if _GPU_AD.fullmatch(key))
        whole["AvailableGPUs"] = classad2.ExprTree("{" + ", ".join(gpus) + "}")
        machines.append(whole)
    return machines


def ever_matches(job: classad2.ClassAd, machines: list[classad2.ClassAd]) -> bool:
    """Whether some machine, whole, satisfies the job's Requirements; a job of a universe that runs on the
    access point (local, scheduler: a transfer step's) needs no machine."""
    if job.get("JobUniverse") in ACCESS_POINT_UNIVERSES:
        return True
    return any(machine.matches(job) for machine in machines)


def never_why(job: classad2.ClassAd, machines: list[classad2.ClassAd]) -> str:
    """Why no machine of the pool can ever run the job, in a user's words: the largest request no machine
    has, else the GPU property no GPU has, else the job's own requirements."""
    if not machines:
        return "the pool has no machines"
    for resource, unit in (("GPUs", ""), ("Cpus", ""), ("Memory", " MB")):
        wanted = job.get(f"Request{resource}")
        most = max((_number(machine.get(resource)) for machine in machines), default=0.0)
        if isinstance(wanted, int | float) and wanted > most:
            name = {"GPUs": "GPUs", "Cpus": "CPUs", "Memory": "memory"}[resource]
            return f"it asks for {wanted:g}{unit} {name}; the largest machine has {most:g}{unit}"
    require = job.lookup("RequireGPUs") if "RequireGPUs" in job else None
    if require is not None and _number(job.get("RequestGPUs")) > 0:
        text = str(require)
        for name in ("GPUsMinMemory", "GPUsMinCapability"):
            if name in job:
                text = re.sub(rf"\b{name}\b", str(job.get(name)), text)
        return f"no GPU in the pool has {text}"
    return "no machine satisfies its requirements"


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
