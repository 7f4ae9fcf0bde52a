"""The condor engine's spec check (engines/base.py EngineDeclaration.spec_check): the fields only HTCondor
reads, checked once when the pipeline is loaded, located in the pipeline file.

- `requirements` (a step's ClassAd expression) must parse with HTCondor's own parser, classad2: wrong
  wherever the pipeline runs, so it is checked for every engine (settings None) as before.
- `classads` names must not be attributes dagflow or HTCondor set themselves, their values must hold no
  control characters (checked for every engine too: the batch engines publish them as well).
- the transfer data mode (nothing shared with the execute node) cannot run a command that names an
  undeclared absolute path (one the execute node must provide, usually a file on the submit side): an
  error everywhere when the pipeline declares `condor: {data_mode: transfer}`, and for a condor run whose
  data mode (--data-mode, else the pipeline's, else transfer) is transfer.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from dagflow.engines.condor.step_fields import SECTION
from dagflow.engines.condor.transfer import TRANSFER, DataModeError, choose_data_mode
from dagflow.errors import Diagnostic
from dagflow.spec.attributes import reserved_attributes
from dagflow.spec.load import Spec
from dagflow.spec.sharing import command_words, input_paths, normal_path
from dagflow.spec.validate import CONTROL_CHARACTERS_HINT, CONTROL_CHARACTERS_MESSAGE
from dagflow.spec.yamlpos import Path_, dotted
from dagflow.text import CONTROL_CHARACTERS

REQUIREMENTS_HINT = 'e.g. CUDACapability >= 7.0 && OpSys == "LINUX"'
# Job attributes dagflow or HTCondor set themselves; a custom ClassAd must not overwrite them.
RESERVED_CLASSADS = frozenset(
    name.lower()
    for name in (
        "Requirements", "Rank", "Owner", "Cmd", "Args", "Arguments", "Environment", "Env", "In", "Out", "Err",
        "UserLog", "Iwd", "JobUniverse", "RequestCpus", "RequestMemory", "RequestDisk", "RequestGpus", "JobPrio",
        "JobStatus", "ClusterId", "ProcId", "DAGManJobId", "DAGNodeName", "DAGParentNodeNames", "PeriodicRemove",
        "PeriodicHold", "PeriodicRelease",
    )
)


def check_spec(spec: Spec, settings: Mapping[str, Any] | None) -> list[Diagnostic]:
    """Every problem of spec in the condor engine's fields; with settings (a condor run), also what the run's
    data mode cannot run."""
    problems = [*_requirements(spec), *_classads(spec)]
    block = getattr(spec.model, SECTION, None)
    declared = block.data_mode if block else None
    if declared == TRANSFER:  # declared in the file: an error wherever it runs
        return problems + transfer_errors(spec)
    if settings is None:
        return problems
    try:
        mode = choose_data_mode(settings.get("data_mode"), declared)
    except DataModeError:
        return problems  # a bad --data-mode is refused, with its own message, where the run is prepared
    return problems + transfer_errors(spec) if mode == TRANSFER else problems


def transfer_errors(spec: Spec) -> list[Diagnostic]:
    """What the transfer data mode cannot run: undeclared absolute paths in commands (located)."""
    errors = []
    for name, step in spec.model.steps.items():
        if step.kind == "transfer":
            continue  # runs on the access point (HTCondor's local universe), where its paths are
        declared = set(input_paths(step))
        for path, word in command_words(name, step):
            if not word.startswith("/") or normal_path(word) in declared or normal_path(word) == "/":
                continue
            errors.append(_located(
                spec, path,
                f"{word!r} is an absolute path the job cannot see in HTCondor's transfer data mode (nothing is "
                "shared with the execute node) and it is not declared",
                hint=f"give it relative to the pipeline's directory so it is transferred, or list it under "
                f"steps.{name}.inputs if the execute node has it at that path (or use condor: "
                "{data_mode: shared})",
            ))  # fmt: skip
    return errors


def _requirements(spec: Spec) -> Iterator[Diagnostic]:
    for name, step in spec.model.steps.items():
        requirements: str | None = getattr(step, "requirements", None)
        if requirements is None:
            continue
        import classad2  # only where a step has requirements: a local run of any other pipeline never loads it

        path = ("steps", name, "requirements")
        if not requirements.strip():
            yield _located(spec, path, "requirements is empty")
            continue
        try:
            classad2.ExprTree(requirements)
        except Exception:
            yield _located(spec, path, f"{requirements.strip()!r} does not parse as a ClassAd expression",
                           hint=REQUIREMENTS_HINT)


def _classads(spec: Spec) -> Iterator[Diagnostic]:
    dagflow_sets = reserved_attributes(spec.model.matrix)  # lower-cased: ClassAds ignore case
    for name, step in spec.model.steps.items():
        for key, value in getattr(step, "classads", {}).items():
            path = ("steps", name, "classads", key)
            setter = dagflow_sets.get(key.lower(), "dagflow")
            if key.lower() in RESERVED_CLASSADS or key.lower() in dagflow_sets:
                yield _located(spec, path, f"{key!r} is set by dagflow or HTCondor itself",
                               allowed="any other attribute name", key=True,
                               hint=None if setter == "dagflow" else f"dagflow sets it for {setter}")
            if isinstance(value, str) and CONTROL_CHARACTERS.search(value):
                yield _located(spec, path, CONTROL_CHARACTERS_MESSAGE, hint=CONTROL_CHARACTERS_HINT)


def _located(spec: Spec, path: Path_, message: str, *, allowed: str | None = None, hint: str | None = None,
             key: bool = False) -> Diagnostic:
    line, column = spec.positions.of(path, key=key)
    return Diagnostic(_filename(spec), line, column, dotted(path), message, allowed, hint)


def _filename(spec: Spec) -> str:
    return spec.filename or str(spec.file)
