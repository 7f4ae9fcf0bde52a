"""The condor engine's spec check (engines/base.py EngineDeclaration.spec_check): the fields only HTCondor
reads, checked once when the pipeline is loaded, located in the pipeline file.

- `requirements` (a step's ClassAd expression) must parse with HTCondor's own parser, classad2: wrong
  wherever the pipeline runs, so it is checked for every engine (settings None) as before.
- the transfer data mode (nothing shared with the execute node) cannot run a command that names an
  undeclared absolute path: an error everywhere when the pipeline declares `condor: {data_mode: transfer}`,
  and for a condor run whose data mode (--data-mode, else the pipeline's, else transfer) is transfer.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from dagflow.engines.condor.transfer import TRANSFER, DataModeError, choose_data_mode
from dagflow.errors import Diagnostic
from dagflow.spec.load import Spec
from dagflow.spec.sharing import absolute_paths
from dagflow.spec.yamlpos import dotted

REQUIREMENTS_HINT = 'e.g. CUDACapability >= 7.0 && OpSys == "LINUX"'


def check_spec(spec: Spec, settings: Mapping[str, Any] | None) -> list[Diagnostic]:
    """Every problem of spec in the condor engine's fields; with settings (a condor run), also what the run's
    data mode cannot run."""
    problems = list(_requirements(spec))
    declared = spec.model.condor.data_mode if spec.model.condor else None
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
    return absolute_paths(spec.model.steps, spec.positions.of, _filename(spec))


def _requirements(spec: Spec) -> Iterator[Diagnostic]:
    for name, step in spec.model.steps.items():
        if step.requirements is None:
            continue
        import classad2  # only where a step has requirements: a local run of any other pipeline never loads it

        path = ("steps", name, "requirements")
        line, column = spec.positions.of(path)
        if not step.requirements.strip():
            yield Diagnostic(_filename(spec), line, column, dotted(path), "requirements is empty")
            continue
        try:
            classad2.ExprTree(step.requirements)
        except Exception:
            yield Diagnostic(
                _filename(spec),
                line,
                column,
                dotted(path),
                f"{step.requirements.strip()!r} does not parse as a ClassAd expression",
                hint=REQUIREMENTS_HINT,
            )


def _filename(spec: Spec) -> str:
    return spec.filename or str(spec.file)
