"""Helpers for the condor tests: hand-built plans, and reading generated files back the way
DAGMan and condor_submit would (VARS as submit macros, then expansion by htcondor2.Submit)."""

from __future__ import annotations

import re
from pathlib import Path

import classad2
import htcondor2

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
        "requirements": None,
        "classads": {},
        "retries": 0,
        "retry_unless_exit": (),
        "timeout_s": None,
        "priority": 0,
        "metrics": None,
    }
    fields.update(overrides)
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
    ad["Requirements"] = classad2.ExprTree(submit.expand("requirements"))
    for key in list(submit):
        if key.lower().startswith("my."):
            ad[key[3:]] = classad2.ExprTree(submit.expand(key))
    return ad


def machine_ad(**overrides: object) -> classad2.ClassAd:
    """An execute slot; defaults describe a GPU node with one 24 GB, capability 8.6 GPU."""
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
    ad = classad2.ClassAd()
    for key, value in fields.items():
        if value is not None:
            ad[key] = value
    ad["Requirements"] = classad2.ExprTree("true")
    return ad


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
