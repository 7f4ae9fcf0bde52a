"""One direction for imports: every import in dagflow/ (module level, inside functions and under
TYPE_CHECKING alike) goes to the same layer or one below it, never between two engines, and the module
graph has no cycle. LAYERS is the map; docs/architecture.md shows the same one."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parent.parent / "dagflow"

# From the top. A module belongs to the entry naming it or the package above it (the longest one wins; the
# root package `dagflow` names only itself), and may import only its own layer or those below it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # the command line: parses options, prints; reaches engines only through the registry
    ("cli", ("dagflow.__main__", "dagflow.cli")),
    # clients of Plan + engines: optimisers and the trial scheduler, cron schedules, reports, the pool side,
    # and what promote nodes run
    (
        "clients",
        (
            "dagflow.agent",
            "dagflow.autoscale",
            "dagflow.promote",
            "dagflow.report",
            "dagflow.schedule",
            "dagflow.search",
        ),
    ),
    # each engine: makes its own dialect (ClassAd text, sbatch/qsub flags) from a Plan
    ("engines", ("dagflow.engines.condor", "dagflow.engines.local", "dagflow.engines.sge", "dagflow.engines.slurm")),
    # what engines build on: the batch engines (Slurm, Grid Engine) and dagflow's DAG scheduler with its job executors
    ("engine-shared", ("dagflow.engines.batch", "dagflow.engines.jobs")),
    # the engine contract and the registry every caller picks engines in
    (
        "engine-contract",
        ("dagflow.engines", "dagflow.engines.base", "dagflow.engines.registry"),
    ),
    # the run directory and what is read back from run directories (run/resources: earlier runs' usage, the
    # `auto` requests it suggests)
    ("run", ("dagflow.run",)),
    # the expanded, engine-neutral DAG
    ("plan", ("dagflow.plan",)),
    # the user's document, typed and validated
    ("spec", ("dagflow.spec",)),
    # leaf helpers: import only each other, nothing of the layers above (transfer: S3/local copies, what
    # transfer nodes run and the spec checks s3:// locations with; policies: the policy files)
    (
        "leaf",
        (
            "dagflow",
            "dagflow.bounded",
            "dagflow.console",
            "dagflow.data",
            "dagflow.errors",
            "dagflow.files",
            "dagflow.gc_pause",
            "dagflow.gpu_memory",
            "dagflow.gpus",
            "dagflow.lazy",
            "dagflow.palette",
            "dagflow.policies",
            "dagflow.text",
            "dagflow.transfer",
        ),
    ),
)
RANK = {name: rank for rank, (name, _) in enumerate(reversed(LAYERS))}  # higher is further up
ENGINE_CONTRACT = ("dagflow.engines.base", "dagflow.engines.registry")  # the only way in from above the engines
SHARED_ENGINES = ("batch", "jobs")  # the engine packages others may build on


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> str:
    best, name = "", ""
    for layer_name, prefixes in LAYERS:
        for prefix in prefixes:
            inside = module == prefix or (module.startswith(prefix + ".") and prefix != "dagflow")
            if inside and len(prefix) > len(best):
                best, name = prefix, layer_name
    assert name, f"{module} is in no layer: add it to LAYERS"
    return name


def _known(dotted: str) -> str | None:
    """The dagflow module dotted names: itself, or the package an attribute of it is taken from."""
    while dotted and dotted not in modules():
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def imported(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """(dagflow module, line) for every import statement of module, wherever it stands."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules() else base for alias in node.names]
        else:
            continue
        for name in names:
            target = _known(name) if name.split(".")[0] == "dagflow" else None
            if target is not None and target != module:
                yield target, node.lineno


@cache
def graph() -> nx.DiGraph:
    found = nx.DiGraph()
    for module, path in modules().items():
        found.add_node(module)
        for target, line in imported(module, path):
            if not found.has_edge(module, target):
                found.add_edge(module, target, line=line)
    return found


def _where(source: str, target: str) -> str:
    path = modules()[source].relative_to(PACKAGE.parent)
    return f"{source} -> {target} ({path}:{graph().edges[source, target]['line']})"


def _engine(module: str) -> str | None:
    """The engine package a module is part of (None outside them and for the contract modules)."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "engines" and layer(module) in ("engines", "engine-shared"):
        return parts[2]
    return None


def against_the_order() -> list[str]:
    return [_where(source, target) for source, target in graph().edges if RANK[layer(target)] > RANK[layer(source)]]


def between_engines() -> list[str]:
    return [
        _where(source, target)
        for source, target in graph().edges
        if _engine(target) not in (None, _engine(source), *SHARED_ENGINES) and _engine(source) is not None
    ]


def around_the_registry() -> list[str]:
    above = {name for name, _ in LAYERS[: [name for name, _ in LAYERS].index("engines")]}
    return [
        _where(source, target)
        for source, target in graph().edges
        if layer(source) in above and target.startswith("dagflow.engines") and target not in ENGINE_CONTRACT
    ]


def cycles() -> list[list[str]]:
    return sorted(sorted(cycle) for cycle in nx.simple_cycles(graph()))


def test_every_module_has_a_layer() -> None:
    assert len(modules()) > 100  # the walk found the package
    for module in modules():
        layer(module)


def test_the_walk_sees_every_kind_of_import() -> None:
    edges = graph()
    assert edges.has_edge("dagflow.spec.load", "dagflow.spec.yamlpos")  # module level, absolute
    assert edges.has_edge("dagflow.cli.resources_cmds", "dagflow.run.resources.suggest")  # inside a function
    assert edges.has_edge("dagflow.run.usage", "dagflow.plan")  # under TYPE_CHECKING
    assert edges.has_edge("dagflow.engines.condor.submit_writer", "dagflow.spec.attributes")  # from PKG import MODULE


def test_no_import_against_the_order() -> None:
    assert against_the_order() == []


def test_no_import_between_engines() -> None:
    assert between_engines() == []


def test_callers_reach_engines_through_the_registry() -> None:
    assert around_the_registry() == []


def test_no_cycle() -> None:
    assert cycles() == []
