"""Demand: the idle jobs waiting in the schedd, and what they ask for.

`ScheddDemand` talks to anything with htcondor2.Schedd's `query(constraint, projection)`: the real
schedd, or `InMemorySchedd`, which evaluates the constraint with classad2 over job ads it holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import classad2

IDLE_CONSTRAINT = "JobStatus == 1"
REQUEST_ATTRIBUTES = ("RequestCpus", "RequestMemory", "RequestDisk", "RequestGpus")
BASE_PROJECTION = (
    "ClusterId",
    "ProcId",
    "JobStatus",
    *REQUEST_ATTRIBUTES,
    "Requirements",
    "DagflowPipeline",
    "DagflowRunId",
    "DagflowStep",
    "DagflowKind",
    "DagflowRegion",
    "DagflowTrial",
)
_ATTRIBUTE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Identify a job, but do not change what it matches: cut out of its signature text.
_IDENTITY = re.compile(
    r'(?i)(?<![A-Za-z0-9_])(ClusterId|ProcId|JobStatus|DagflowRunId|DagflowTrial) = ("(?:[^"\\]|\\.)*"|[^;\]]*)(; )?'
)


MAX_PROJECTION_ROUNDS = 3


def unprojected_references(ads: Iterable[classad2.ClassAd], projection: Sequence[str]) -> set[str]:
    """Job attributes (MY. or unscoped) that the ads' expressions read but the projection left out.

    Unscoped names may be machine attributes (HAS_GPU): asking the schedd for them costs nothing.
    """
    asked = {name.lower() for name in projection}
    seen: set[str] = set()
    missing: set[str] = set()
    for ad in ads:
        for name in ad:
            expression = ad.lookup(name)
            text = str(expression)
            if not isinstance(expression, classad2.ExprTree) or text in seen:
                continue
            seen.add(text)
            for reference in ad.externalRefs(expression):
                scope, _, attribute = reference.rpartition(".")
                if scope.upper() in ("", "MY") and attribute.lower() not in asked and _ATTRIBUTE.fullmatch(attribute):
                    missing.add(attribute)
    return missing


class QueryInterface(Protocol):
    def query(self, constraint: str = "True", projection: list[str] = ...) -> list[classad2.ClassAd]: ...


class DemandSource(Protocol):
    def idle_jobs(self) -> list[classad2.ClassAd]: ...


class ScheddDemand:
    """Idle jobs from a schedd (htcondor2.Schedd() unless another query interface is given)."""

    def __init__(self, schedd: QueryInterface | None = None, extra_attributes: Sequence[str] = ()) -> None:
        self._schedd = schedd
        self.projection = list(dict.fromkeys([*BASE_PROJECTION, *extra_attributes]))

    @property
    def schedd(self) -> QueryInterface:
        if self._schedd is None:
            import htcondor2

            self._schedd = htcondor2.Schedd()
        return self._schedd

    def idle_jobs(self) -> list[classad2.ClassAd]:
        """The idle jobs, with every job attribute their Requirements and requests read: condor_submit
        adds some (RequireGPUs, GPUsMinMemory, TransferInputSizeMB ...), a site's expressions others.
        Missing ones are asked for in another query (at most a few rounds: references nest)."""
        projection = self.projection
        ads = list(self.schedd.query(constraint=IDLE_CONSTRAINT, projection=projection))
        for _round in range(MAX_PROJECTION_ROUNDS):
            missing = unprojected_references(ads, projection)
            if not missing:
                break
            projection = [*projection, *sorted(missing)]
            ads = list(self.schedd.query(constraint=IDLE_CONSTRAINT, projection=projection))
        return ads


class InMemorySchedd:
    """A job queue in memory with the schedd's query semantics: constraint evaluated per ad, projection."""

    def __init__(self, ads: Iterable[classad2.ClassAd] = ()) -> None:
        self.ads = list(ads)
        self.queries: list[tuple[str, list[str]]] = []

    @classmethod
    def from_file(cls, path: Path) -> InMemorySchedd:
        """Job ads in the long format `condor_q -l` prints, blank-line separated."""
        return cls(classad2.parseAds(Path(path).read_text(encoding="utf-8")))

    def query(self, constraint: str = "True", projection: list[str] | None = None) -> list[classad2.ClassAd]:
        projection = list(projection or [])
        self.queries.append((constraint, projection))
        expression = classad2.ExprTree(constraint)
        result = []
        for ad in self.ads:
            if expression.eval(ad) is not True:
                continue
            if not projection:
                result.append(ad)
                continue
            projected = classad2.ClassAd()
            for name in projection:
                if name in ad:
                    projected[name] = ad.lookup(name)
            result.append(projected)
        return result


@dataclass(frozen=True, slots=True)
class Request:
    cpus: float
    memory: float  # MiB
    disk: float  # KiB
    gpus: float

    def vector(self) -> tuple[float, float, float, float]:
        return (self.cpus, self.memory, self.disk, self.gpus)


@dataclass
class Signature:
    """Jobs that ask for the same thing: one matchmaking decision serves all of them."""

    key: tuple[Any, ...]
    request: Request
    job_ad: classad2.ClassAd  # the first job's ad: what matchmaking evaluates
    requirements: str
    count: int
    examples: list[str]  # a few job ids, for reports


def _number(ad: classad2.ClassAd, name: str, default: float) -> float:
    if name not in ad:
        return default
    value = ad.eval(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def job_id(ad: classad2.ClassAd) -> str:
    return f"{ad.get('ClusterId', '?')}.{ad.get('ProcId', '?')}"


def signatures(ads: Iterable[classad2.ClassAd]) -> list[Signature]:
    """Group idle jobs by everything matchmaking can see: Requirements, requests, other projected values."""
    groups: dict[str, Signature] = {}
    for ad in ads:
        # The ad's whole text minus its identity: one C++ call per job instead of one per attribute.
        key = _IDENTITY.sub("", str(ad))
        signature = groups.get(key)
        if signature is not None:
            signature.count += 1
            if len(signature.examples) < 3:
                signature.examples.append(job_id(ad))
            continue
        request = Request(
            cpus=_number(ad, "RequestCpus", 1),
            memory=_number(ad, "RequestMemory", 0),
            disk=_number(ad, "RequestDisk", 0),
            gpus=_number(ad, "RequestGpus", 0),
        )
        requirements = str(ad.lookup("Requirements")) if "Requirements" in ad else "true"
        groups[key] = Signature((key,), request, ad, requirements, 1, [job_id(ad)])
    return list(groups.values())
