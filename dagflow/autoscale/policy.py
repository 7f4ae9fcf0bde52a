"""policies/autoscale.yaml: the autoscaling groups, their machine templates, and the loop's guards."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import classad2

from dagflow.data import data_dir
from dagflow.errors import Diagnostic, SpecError
from dagflow.spec.yamlpos import Positions, dotted, load_yaml

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]*")
_ATTRIBUTE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESOURCE_ATTRIBUTES = ("Cpus", "Memory", "Disk", "GPUs")
# A GPU ad's attribute -> the machine template's attribute it is made from (add_gpu_ads).
_GPU_PROPERTIES = {
    "GlobalMemoryMb": "GPUs_GlobalMemoryMb",
    "Capability": "CUDACapability",
    "DeviceName": "DagflowGpuModel",
}


@dataclass(frozen=True, slots=True)
class Settings:
    loop_interval_s: float = 60.0
    idle_grace_s: float = 600.0  # a node idle for less than this is never scaled in
    max_scale_in_fraction: float = 0.2  # of the pool's nodes, per loop (at least one node)
    capacity_timeout_s: float = 3600.0  # how long a group that ran out of capacity is skipped
    backoff_max_s: float = 900.0
    region_order: tuple[str, ...] = ()  # overflow order between regions when priorities tie
    demand_attributes: tuple[str, ...] = ()  # extra job attributes Requirements may read (projection)


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    asg: str
    region: str
    instance_type: str
    spot: bool
    min_size: int
    max_size: int
    priority: int  # lower is tried first
    machine: dict[str, Any]  # the machine ad a node of this group advertises (whole machine)
    start: str  # the machine's START / Requirements expression

    @property
    def capacity(self) -> tuple[float, float, float, float]:
        return tuple(float(self.machine.get(name, 0)) for name in RESOURCE_ATTRIBUTES)  # type: ignore[return-value]

    def machine_ad(self) -> classad2.ClassAd:
        ad = classad2.ClassAd()
        for name, value in self.machine.items():
            ad[name] = value
        if "AvailableGPUs" not in ad:
            add_gpu_ads(ad)
        ad["Requirements"] = classad2.ExprTree(self.start)
        return ad


def add_gpu_ads(ad: classad2.ClassAd) -> None:
    """The per-GPU ads a startd with GPU discovery advertises (AvailableGPUs = { GPUs_GPU_<id>, ... }),
    made from the template's GPUs, GPUs_GlobalMemoryMb, CUDACapability and DagflowGpuModel: condor_submit
    turns gpus_minimum_memory / gpus_minimum_capability into a count over these, not over slot attributes."""
    count = ad.get("GPUs", 0)
    if not isinstance(count, int | float) or isinstance(count, bool) or count < 1:
        return
    names = []
    for index in range(int(count)):
        gpu = classad2.ClassAd()
        gpu["Id"] = f"GPU-{index}"
        for key, source in _GPU_PROPERTIES.items():
            if source in ad:
                gpu[key] = ad.lookup(source)
        names.append(f"GPUs_GPU_{index}")
        ad[names[-1]] = gpu
    ad["AvailableGPUs"] = classad2.ExprTree("{ " + ", ".join(names) + " }")


@dataclass(frozen=True, slots=True)
class Policy:
    groups: tuple[Group, ...]  # in overflow order: priority, then region_order, then name
    settings: Settings = field(default_factory=Settings)
    source: str = "<built-in>"

    def group(self, name: str) -> Group:
        for group in self.groups:
            if group.name == name:
                return group
        raise KeyError(name)


class _Reader:
    def __init__(self, filename: str, positions: Positions) -> None:
        self.filename = filename
        self.positions = positions
        self.diagnostics: list[Diagnostic] = []

    def error(self, path: tuple[str | int, ...], message: str, allowed: str | None = None) -> None:
        line, column = self.positions.of(path)
        self.diagnostics.append(Diagnostic(self.filename, line, column, dotted(path), message, allowed))

    def keys(self, value: dict[str, Any], path: tuple[str | int, ...], allowed: set[str]) -> None:
        for key in value:
            if key not in allowed:
                line, column = self.positions.of((*path, key), key=True)
                self.diagnostics.append(
                    Diagnostic(
                        self.filename, line, column, dotted((*path, key)), "unknown key", ", ".join(sorted(allowed))
                    )
                )

    def number(self, value: Any, path: tuple[str | int, ...], minimum: float, integer: bool = False) -> float | None:
        if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
            self.error(path, f"expected {'an integer' if integer else 'a number'}, got {value!r}")
            return None
        if not math.isfinite(value) or value < minimum:
            self.error(path, f"must be at least {minimum:g}, got {value!r}")
            return None
        return value

    def string(self, value: Any, path: tuple[str | int, ...], pattern: re.Pattern[str] = _NAME) -> str | None:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            self.error(path, f"expected a name ({pattern.pattern}), got {value!r}")
            return None
        return value


_SETTINGS_KEYS = {
    "loop_interval_s",
    "idle_grace_s",
    "max_scale_in_fraction",
    "capacity_timeout_s",
    "backoff_max_s",
    "region_order",
    "demand_attributes",
}
_GROUP_KEYS = {"name", "asg", "region", "instance_type", "spot", "min", "max", "priority", "machine", "start"}
_REQUIRED_GROUP_KEYS = ("name", "asg", "region", "instance_type", "max", "machine")


def _settings(reader: _Reader, raw: Any) -> Settings:
    if raw is None:
        return Settings()
    if not isinstance(raw, dict):
        reader.error(("settings",), "expected a mapping")
        return Settings()
    reader.keys(raw, ("settings",), _SETTINGS_KEYS)
    values: dict[str, Any] = {}
    for key in ("loop_interval_s", "idle_grace_s", "capacity_timeout_s", "backoff_max_s"):
        if key in raw and (number := reader.number(raw[key], ("settings", key), 0)) is not None:
            values[key] = float(number)
    if "max_scale_in_fraction" in raw:
        fraction = reader.number(raw["max_scale_in_fraction"], ("settings", "max_scale_in_fraction"), 0)
        if fraction is not None and fraction > 1:
            reader.error(("settings", "max_scale_in_fraction"), f"must be at most 1, got {fraction!r}")
        elif fraction is not None:
            values["max_scale_in_fraction"] = float(fraction)
    for key, pattern in (("region_order", _NAME), ("demand_attributes", _ATTRIBUTE)):
        if key in raw:
            items = raw[key]
            if not isinstance(items, list):
                reader.error(("settings", key), "expected a list")
                continue
            checked = [reader.string(item, ("settings", key, index), pattern) for index, item in enumerate(items)]
            values[key] = tuple(item for item in checked if item)
    return Settings(**values)


def _machine(reader: _Reader, raw: Any, path: tuple[str | int, ...], defaults: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        reader.error(path, "expected a mapping of machine ClassAd attributes")
        return {}
    machine = dict(defaults)
    for name, value in raw.items():
        if not _ATTRIBUTE.fullmatch(name):
            reader.error((*path, name), f"{name!r} is not a ClassAd attribute name")
        elif isinstance(value, bool | int | float | str):
            machine[name] = value
        else:
            reader.error((*path, name), f"expected a number, string or boolean, got {type(value).__name__}")
    for name in ("Cpus", "Memory"):
        if name not in machine:
            reader.error(path, f"the machine template needs {name} (the whole instance's {name.lower()})")
    for name in RESOURCE_ATTRIBUTES:
        if name in machine and not (isinstance(machine[name], int | float) and not isinstance(machine[name], bool)):
            reader.error((*path, name), f"expected a number, got {machine[name]!r}")
    return machine


def _group(reader: _Reader, raw: Any, index: int, defaults: dict[str, Any]) -> Group | None:
    path: tuple[str | int, ...] = ("groups", index)
    if not isinstance(raw, dict):
        reader.error(path, "expected a mapping describing one autoscaling group")
        return None
    before = len(reader.diagnostics)
    reader.keys(raw, path, _GROUP_KEYS)
    for key in _REQUIRED_GROUP_KEYS:
        if key not in raw:
            reader.error(path, f"missing required key {key!r}")
    name = reader.string(raw.get("name"), (*path, "name")) if "name" in raw else None
    asg = reader.string(raw.get("asg"), (*path, "asg")) if "asg" in raw else None
    region = reader.string(raw.get("region"), (*path, "region")) if "region" in raw else None
    instance_type = (
        reader.string(raw.get("instance_type"), (*path, "instance_type")) if "instance_type" in raw else None
    )
    spot = raw.get("spot", False)
    if not isinstance(spot, bool):
        reader.error((*path, "spot"), f"expected true or false, got {spot!r}")
    min_size = reader.number(raw.get("min", 0), (*path, "min"), 0, integer=True)
    max_size = reader.number(raw["max"], (*path, "max"), 0, integer=True) if "max" in raw else None
    priority = reader.number(raw.get("priority", 100), (*path, "priority"), 0, integer=True)
    if min_size is not None and max_size is not None and min_size > max_size:
        reader.error((*path, "min"), f"min ({min_size}) is larger than max ({max_size})")
    machine = _machine(reader, raw["machine"], (*path, "machine"), defaults) if "machine" in raw else {}
    start = raw.get("start", "true")
    try:
        if not isinstance(start, str | bool):
            raise ValueError
        classad2.ExprTree(str(start).lower() if isinstance(start, bool) else start)
    except Exception:
        reader.error((*path, "start"), f"not a ClassAd expression: {start!r}")
    if len(reader.diagnostics) > before:
        return None
    # What the node agent advertises on an instance of this group, unless the template says otherwise.
    machine.setdefault("DagflowRegion", region)
    machine.setdefault("EC2InstanceType", instance_type)
    machine.setdefault("EC2Lifecycle", "spot" if spot else "on-demand")
    machine.setdefault("HAS_GPU", bool(machine.get("GPUs", 0)))
    # condor_submit's Requirements compare TARGET.CondorVersion (25.x: the disk clause): nodes run this release.
    machine.setdefault("CondorVersion", f"$CondorVersion: {classad2.version()} $")
    return Group(
        name=str(name),
        asg=str(asg),
        region=str(region),
        instance_type=str(instance_type),
        spot=bool(spot),
        min_size=int(min_size or 0),
        max_size=int(max_size or 0),
        priority=int(priority or 0),
        machine=machine,
        start=str(start).lower() if isinstance(start, bool) else str(start),
    )


def parse_policy(text: str, filename: str) -> Policy:
    """Read an autoscale policy; SpecError with every located problem (exit code 2) when it is invalid."""
    if not text.strip():
        raise SpecError([Diagnostic(filename, 1, 1, "", "the file is empty; expected `groups:`")])
    data, positions = load_yaml(text, filename)
    reader = _Reader(filename, positions)
    if not isinstance(data, dict):
        raise SpecError([Diagnostic(filename, 1, 1, "", "expected a mapping with `groups:`")])
    reader.keys(data, (), {"settings", "defaults", "groups"})
    settings = _settings(reader, data.get("settings"))
    defaults: dict[str, Any] = {}
    raw_defaults = data.get("defaults") or {}
    if not isinstance(raw_defaults, dict):
        reader.error(("defaults",), "expected a mapping")
    else:
        reader.keys(raw_defaults, ("defaults",), {"machine"})
        raw_machine = raw_defaults.get("machine") or {}
        if isinstance(raw_machine, dict):
            defaults = {k: v for k, v in raw_machine.items() if _ATTRIBUTE.fullmatch(str(k))}
        else:
            reader.error(("defaults", "machine"), "expected a mapping of machine ClassAd attributes")
    raw_groups = data.get("groups")
    groups: list[Group] = []
    if not isinstance(raw_groups, list) or not raw_groups:
        reader.error(("groups",), "expected a non-empty list of autoscaling groups")
    else:
        for index, raw in enumerate(raw_groups):
            group = _group(reader, raw, index, defaults)
            if group is not None:
                groups.append(group)
        seen: dict[str, int] = {}
        for index, raw in enumerate(raw_groups):
            name = raw.get("name") if isinstance(raw, dict) else None
            if isinstance(name, str):
                if name in seen:
                    reader.error(
                        ("groups", index, "name"), f"group name {name!r} is already used by groups[{seen[name]}]"
                    )
                seen.setdefault(name, index)
    if reader.diagnostics:
        raise SpecError(reader.diagnostics)
    order = {region: index for index, region in enumerate(settings.region_order)}
    groups.sort(key=lambda g: (g.priority, order.get(g.region, len(order)), g.name))
    return Policy(groups=tuple(groups), settings=settings, source=filename)


def load_policy(path: Path | None = None) -> Policy:
    path = Path(path) if path is not None else data_dir("policies") / "autoscale.yaml"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError([Diagnostic(str(path), 0, 0, "", f"cannot read the policy: {error.strerror}")]) from None
    return parse_policy(text, str(path))
