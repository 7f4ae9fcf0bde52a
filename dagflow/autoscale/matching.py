"""Which groups' machines can run which jobs: classad2 matchmaking of each job signature against each
group's machine template (both sides' Requirements), plus a check that the request fits the instance."""

from __future__ import annotations

import re
from collections.abc import Sequence

import classad2

from dagflow.autoscale.demand import Request, Signature
from dagflow.autoscale.policy import Group

Vector = tuple[float, float, float, float]


def fits(request: Request, capacity: Vector) -> bool:
    return all(need <= have for need, have in zip(request.vector(), capacity, strict=True))


def per_instance(request: Vector, capacity: Vector) -> int:
    """How many jobs of this size one instance with `capacity` free holds."""
    counts = [int(have // need) for need, have in zip(request, capacity, strict=True) if need > 0]
    return min(counts) if counts else 1_000_000  # a request for nothing: unbounded in practice


Items = list[tuple[str, object]]

# What condor_submit writes into a job's Requirements for per-GPU limits (gpus_minimum_memory,
# gpus_minimum_capability, require_gpus): count the machine's GPUs whose own ad satisfies RequireGPUs.
_GPU_COUNT = re.compile(r"countMatches\(\s*(?:MY\.)?RequireGPUs\s*,\s*(?:TARGET\.)?AvailableGPUs\s*\)", re.IGNORECASE)


def machine_gpus(machine: classad2.ClassAd) -> list[classad2.ClassAd]:
    """The machine's per-GPU ads, as its AvailableGPUs list names them (GPUs_GPU_<id> = [ ... ])."""
    if "AvailableGPUs" not in machine:
        return []
    listed = machine.eval("AvailableGPUs")
    if not isinstance(listed, list):
        return []
    gpus = [machine.eval(str(item)) if isinstance(item, classad2.ExprTree) else item for item in listed]
    return [gpu for gpu in gpus if isinstance(gpu, classad2.ClassAd)]


def matching_gpus(job: classad2.ClassAd, machine: classad2.ClassAd) -> int:
    """How many of the machine's GPUs satisfy the job's RequireGPUs, each GPU's ad evaluated over the
    job's (a GPU's GlobalMemoryMb against the job's GPUsMinMemory), as the negotiator counts them."""
    if "RequireGPUs" not in job:
        return len(machine_gpus(machine))
    require = job.lookup("RequireGPUs")
    if not isinstance(require, classad2.ExprTree):
        return len(machine_gpus(machine)) if require is True else 0
    count = 0
    for gpu in machine_gpus(machine):
        scope = classad2.ClassAd()
        for name, value in [*job.items(), *gpu.items()]:
            scope[name] = value
        count += require.eval(scope=scope) is True
    return count


def _requirements(me: classad2.ClassAd, other: classad2.ClassAd) -> classad2.ExprTree | object:
    """me's Requirements, with condor_submit's per-GPU count worked out here: classad2 evaluates
    countMatches over a TARGET's list of nested GPU ads as an error (the negotiator does not)."""
    requirements = me.lookup("Requirements")
    text = str(requirements)
    if not isinstance(requirements, classad2.ExprTree) or not _GPU_COUNT.search(text):
        return requirements
    return classad2.ExprTree(_GPU_COUNT.sub(str(matching_gpus(me, other)), text))


def _holds(
    me: classad2.ClassAd, other: classad2.ClassAd, me_items: Items | None = None, other_items: Items | None = None
) -> bool:
    """`me`'s Requirements, evaluated the way HTCondor's negotiator does.

    HTCondor resolves an unscoped reference in MY first and then in TARGET (that is how a job's
    `OpSys == "LINUX"` or `HAS_GPU =?= true` reads the machine). classad2's symmetricMatch does not
    fall back to TARGET, so the evaluation scope here is `other` overlaid with `me`.
    """
    if "Requirements" not in me:
        return True
    requirements = _requirements(me, other)
    if str(requirements).lower() == "true":
        return True
    scope = classad2.ClassAd()
    for name, value in other_items if other_items is not None else other.items():
        scope[name] = value
    for name, value in me_items if me_items is not None else me.items():
        scope[name] = value
    return requirements.eval(scope=scope, target=other) is True


def htcondor_match(job: classad2.ClassAd, machine: classad2.ClassAd) -> bool:
    """Both sides' Requirements hold, with HTCondor's MY-then-TARGET lookup of unscoped names."""
    return _holds(job, machine) and _holds(machine, job)


class Matcher:
    """Caches match results by (signature key, group name): signatures repeat from loop to loop."""

    def __init__(self, groups: Sequence[Group]) -> None:
        self.groups = list(groups)
        self._ads = {group.name: group.machine_ad() for group in self.groups}
        self._items = {name: list(ad.items()) for name, ad in self._ads.items()}
        self._job_items: dict[object, Items] = {}
        self._cache: dict[tuple[object, str], bool] = {}
        self.evaluations = 0

    def matches(self, signature: Signature, group: Group) -> bool:
        cache_key = (signature.key, group.name)
        cached = self._cache.get(cache_key)
        if cached is None:
            self.evaluations += 1
            cached = fits(signature.request, group.capacity) and self._match(signature, group)
            self._cache[cache_key] = cached
        return cached

    def _match(self, signature: Signature, group: Group) -> bool:
        job, machine = signature.job_ad, self._ads[group.name]
        job_items = self._job_items.get(signature.key)
        if job_items is None:
            job_items = self._job_items[signature.key] = list(job.items())
        machine_items = self._items[group.name]
        return _holds(job, machine, job_items, machine_items) and _holds(machine, job, machine_items, job_items)

    def candidates(self, signature: Signature) -> list[Group]:
        return [group for group in self.groups if self.matches(signature, group)]

    def explain(self, signature: Signature) -> str:
        """Why a signature matches no group (for the unmatched report)."""
        requirement_ok = [g.name for g in self.groups if htcondor_match(signature.job_ad, self._ads[g.name])]
        if not requirement_ok:
            return "its Requirements match no group's machine"
        return f"matches {', '.join(requirement_ok)} but the request does not fit those instances"
