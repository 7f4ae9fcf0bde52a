"""Helpers for the condor tests: hand-built plans, and reading generated files back the way
DAGMan and condor_submit would (VARS as submit macros, then expansion by htcondor2.Submit)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import classad2
import htcondor2
import pytest

from dagflow.agent.condor_config import read_params
from dagflow.engines.condor.lint import DagFile
from dagflow.engines.condor.submit_writer import runtime_environment
from dagflow.plan.model import Node, Plan, Resources, StepInfo

GPU_RESOURCES = Resources(cpus=4, memory_mb=8192, disk_mb=2048, gpus=1, gpu_memory_mb=16384, cuda_capability=7.5)


def step(name: str, kind: str = "command", **overrides: object) -> StepInfo:
    fields: dict[str, object] = {
        "name": name,
        "kind": kind,
        "axes": ("region",),
        "resources": Resources(),
        "retries": 0,
        "retry_unless_exit": (),
        "timeout_s": None,
        "priority": 0,
        "metrics": None,
    }
    fields.update(overrides)
    section: dict[str, object] = {}  # the condor engine's fields: in its section of the step
    if requirements := fields.pop("requirements", None):
        section["requirements"] = [requirements]
    if classads := fields.pop("classads", None):
        section["classads"] = classads
    if section:
        fields["engine_fields"] = {"condor": section}
    return StepInfo(**fields)  # type: ignore[arg-type]


def regional_plan(
    regions: tuple[str, ...] = ("us", "br"),
    train_argv: list[str] | None = None,
    train_env: dict[str, str] | None = None,
    workdir: str = ".",
    **train_overrides: object,
) -> Plan:
    """fetch (transfer) -> train (GPU) per region, then one report over regions."""
    steps = {
        "fetch": step("fetch", "transfer"),
        "train": step(
            "train",
            "train",
            **{
                "resources": GPU_RESOURCES,
                "requirements": '(OpSys == "LINUX")',
                "classads": {"DagflowTeam": "recs", "Budget": 12, "Urgent": True, "Share": 0.5},
                "retries": 2,
                "retry_unless_exit": (3,),
                "timeout_s": 3600,
                "priority": 5,
                **train_overrides,
            },
        ),
        "report": step("report", "evaluate", axes=()),
    }
    nodes: dict[str, Node] = {}
    for region in regions:
        nodes[f"fetch.{region}"] = Node(
            f"fetch.{region}",
            "fetch",
            ["dagflow", "transfer", f"s3://ratings/{region}/", f"data/{region}/"],
            {},
            {"region": region},
        )
    for region in regions:
        argv = train_argv or ["python", "train.py", "--data", f"data/{region}"]
        nodes[f"train.{region}"] = Node(
            f"train.{region}",
            "train",
            list(argv),
            dict(train_env or {"SEED": "1"}),
            {"region": region},
            parents=[f"fetch.{region}"],
        )
    nodes["report"] = Node("report", "report", ["python", "report.py"], {}, {}, parents=[f"train.{r}" for r in regions])
    return Plan("ratings", "run-1", "pipeline.yaml", steps, nodes, workdir=workdir)


def node_submit(dag: DagFile, node: str) -> htcondor2.Submit:
    """The node's submit description with its VARS set as macros, as DAGMan submits it."""
    submit = htcondor2.Submit(dag.submit_path(node).read_text(encoding="utf-8"))
    for macro, value in dag.vars.get(node, {}).items():
        submit[macro] = value
    submit["JOB"] = node
    return submit


def _evaluate(expression: str) -> object:
    ad = classad2.ClassAd()
    ad["x"] = classad2.ExprTree(expression)
    return ad.eval("x")


def argv_of(submit: htcondor2.Submit) -> list[str]:
    """The argv HTCondor reads from a new-syntax `arguments = "..."`, via its own argsToList()."""
    text = submit.expand("arguments")
    assert text.startswith('"') and text.endswith('"'), text
    # condor_submit's step for the new syntax: drop the outer quotes, "" stands for one ".
    raw = text[1:-1].replace('""', '"')
    return list(_evaluate(f"argsToList({classad2.quote(raw)})"))  # type: ignore[call-overload]


def environment_canonical(v2: str) -> str:
    """HTCondor's own canonical form of a V2 environment string (mergeEnvironment re-serialises it)."""
    return str(_evaluate(f"mergeEnvironment({classad2.quote(v2)})"))


def environment_of(submit: htcondor2.Submit) -> str:
    text = submit.expand("environment")
    assert text.startswith('"') and text.endswith('"'), text
    return environment_canonical(text[1:-1].replace('""', '"'))


def environment_expected(env: dict[str, str], runtime: bool = False) -> str:
    """The same canonical form, built from the V1 syntax (no quoting at all) by envV1ToV2(); with
    runtime, as a compiled job gets it: the runtime environment first, the node's own values winning."""
    if runtime:
        env = {**runtime_environment(), **env}
    v1 = ";".join(f"{name}={value}" for name, value in env.items())
    return environment_canonical(str(_evaluate(f"envV1ToV2({classad2.quote(v1)})")))


_UNITS = {"": 1, "K": 1, "KB": 1, "M": 1024, "MB": 1024, "G": 1024**2, "GB": 1024**2}


def _kib(quantity: str) -> int:
    number, unit = re.fullmatch(r"([0-9]+)\s*([A-Za-z]*)", quantity.strip()).groups()  # type: ignore[union-attr]
    return int(number) * _UNITS[unit.upper()]


def job_ad(submit: htcondor2.Submit) -> classad2.ClassAd:
    """The matchmaking part of the job ad condor_submit would build (Request*, Requirements, My.*)."""
    ad = classad2.ClassAd()
    ad["RequestCpus"] = int(submit.expand("request_cpus"))
    memory = submit.expand("request_memory")  # MiB when no unit
    ad["RequestMemory"] = _kib(memory) // 1024 if re.search(r"[A-Za-z]", memory) else int(memory)
    ad["RequestDisk"] = _kib(submit.expand("request_disk"))  # KiB
    ad["RequestGPUs"] = int(submit.expand("request_gpus"))
    ad["Requirements"] = classad2.ExprTree(_with_gpu_clause(submit, ad, submit.expand("requirements")))
    for key in list(submit):
        if key.lower().startswith("my."):
            ad[key[3:]] = classad2.ExprTree(submit.expand(key))
    return ad


def _with_gpu_clause(submit: htcondor2.Submit, ad: classad2.ClassAd, requirements: str) -> str:
    """What condor_submit (25.x, measured with -dry-run) does with request_gpus and the per-GPU limits:
    RequireGPUs from require_gpus, gpus_minimum_capability and gpus_minimum_memory, and a clause
    counting the machine's GPUs that satisfy it; nothing when the requirements already name TARGET.GPUs."""
    if ad["RequestGPUs"] <= 0 or "target.gpus " in requirements.lower():
        return requirements
    per_gpu = []
    if "require_gpus" in submit:
        per_gpu.append(submit.expand("require_gpus"))
    if "gpus_minimum_capability" in submit:
        ad["GPUsMinCapability"] = classad2.ExprTree(submit.expand("gpus_minimum_capability"))
        per_gpu.append("Capability >= GPUsMinCapability")
    if "gpus_minimum_memory" in submit:
        ad["GPUsMinMemory"] = classad2.ExprTree(submit.expand("gpus_minimum_memory"))
        per_gpu.append("GlobalMemoryMb >= GPUsMinMemory")
    if not per_gpu:
        return f"({requirements}) && (TARGET.GPUs >= RequestGPUs)"
    ad["RequireGPUs"] = classad2.ExprTree(" && ".join(per_gpu))
    return f"({requirements}) && (countMatches(MY.RequireGPUs, TARGET.AvailableGPUs) >= RequestGPUs)"


def gpu_device(memory_mb: int, capability: float, name: str = "NVIDIA GPU") -> dict[str, object]:
    """One GPU as HTCondor's GPU discovery describes it (a GPUs_GPU_<id> nested ad)."""
    return {"GlobalMemoryMb": memory_mb, "Capability": capability, "DeviceName": name}


def _add_devices(ad: classad2.ClassAd, devices: list[dict[str, object]]) -> None:
    names = []
    for index, device in enumerate(devices):
        name = f"GPUs_GPU_{index:08x}"
        nested = classad2.ClassAd()
        nested["Id"] = f"GPU-{index:08x}"
        for key, value in device.items():
            nested[key] = value
        ad[name] = nested
        names.append(name)
    ad["AvailableGPUs"] = classad2.ExprTree("{ " + ", ".join(names) + " }")


def machine_ad(devices: list[dict[str, object]] | None = None, **overrides: object) -> classad2.ClassAd:
    """An execute slot; defaults describe a GPU node with one 24 GB, capability 8.6 GPU.

    Its GPUs are nested ads listed in AvailableGPUs, as HTCondor's GPU discovery advertises them:
    `devices` when given (mixed GPUs), else GPUs copies of the slot-wide GPUs_GlobalMemoryMb and
    CUDACapability (a node of identical GPUs)."""
    fields: dict[str, object] = {
        "MyType": "Machine",
        "Machine": "gpu1.example.org",
        "OpSys": "LINUX",
        "Arch": "X86_64",
        "Cpus": 16,
        "Memory": 65536,
        "Disk": 100 * 1024 * 1024,
        "GPUs": 1,
        "HAS_GPU": True,
        "GPUs_GlobalMemoryMb": 24576,
        "CUDACapability": 8.6,
    }
    fields.update(overrides)
    if devices is not None:
        fields |= {"GPUs": len(devices), "GPUs_GlobalMemoryMb": None, "CUDACapability": None}
    elif fields["GPUs"] and fields["GPUs_GlobalMemoryMb"] is not None and fields["CUDACapability"] is not None:
        devices = [gpu_device(fields["GPUs_GlobalMemoryMb"], fields["CUDACapability"])] * int(fields["GPUs"])  # type: ignore[arg-type, call-overload]
    ad = classad2.ClassAd()
    for key, value in fields.items():
        if value is not None:
            ad[key] = value
    _add_devices(ad, devices or [])
    ad["Requirements"] = classad2.ExprTree("true")
    return ad


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Event log times are local time; the recorded and hand-written condor files assume UTC. Autouse in a
    test module that imports it."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def advertised_attributes(config_file: Path) -> classad2.ClassAd:
    """The ClassAd attributes a startd reading `config_file` would add through STARTD_ATTRS."""
    values = read_params(config_file, ["STARTD_ATTRS"])
    names = [name for name in re.split(r"[\s,]+", values["STARTD_ATTRS"] or "") if name]
    ad = classad2.ClassAd()
    for name in names:
        if values.get(name) is not None:
            ad[name] = classad2.ExprTree(values[name])
    return ad
