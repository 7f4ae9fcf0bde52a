"""load_spec(): from a pipeline file to a checked Spec, the one way in for every command.

The YAML is read with source positions (spec/yamlpos.py), checked as a whole (spec/validate.py), and
either returned as a Spec or refused with a SpecError that lists every problem found, each located at
file:line:column.

`engines` is what the engines add (engines/registry.py spec_checks, spec/sections.py): their blocks and step
fields, validated with the document, and their spec checks, whose problems join the document's own in the
one SpecError. The spec knows no engine; its callers pass the engines' parts in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dagflow.errors import Diagnostic, SpecError
from dagflow.gc_pause import gc_paused
from dagflow.spec.model import PipelineSpec
from dagflow.spec.sections import NO_ENGINES, EngineSections
from dagflow.spec.validate import check_document
from dagflow.spec.yamlpos import Positions, load_yaml


@dataclass(frozen=True)
class Spec:
    model: PipelineSpec
    file: Path
    positions: Positions
    warnings: tuple[Diagnostic, ...] = ()  # what is allowed but should change (a deprecated key)
    filename: str = ""  # the file as the user named it, as diagnostics show it
    engines: EngineSections | None = None  # what the engines added to the document (None: nothing)


SpecCheck = Callable[[Spec], list[Diagnostic]]
"""An engine's check of a schema-valid Spec: every problem it finds, located in the pipeline file."""


def load_spec(path: str | Path, engines: EngineSections | None = None) -> Spec:
    path = Path(path)
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([Diagnostic(name, 0, 0, "", "no such file")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Diagnostic(name, 0, 0, "", f"cannot read the file: {exc}")]) from None
    return parse_spec(text, name, base=path.resolve().parent, engines=engines)


def parse_spec(text: str, filename: str, base: Path | None = None, engines: EngineSections | None = None) -> Spec:
    with gc_paused():  # a document of thousands of steps is a million containers, none of them garbage
        return _parse_spec(text, filename, base, engines or NO_ENGINES)


def _parse_spec(text: str, filename: str, base: Path | None, engines: EngineSections) -> Spec:
    data, positions = load_yaml(text, filename)
    checked = check_document(data, positions, filename, base, engines)
    if checked.model is None:
        raise SpecError(checked.diagnostics)
    file = (base or Path.cwd()) / Path(filename).name
    spec = Spec(model=checked.model, file=file, positions=positions, warnings=tuple(checked.warnings),
                filename=filename, engines=engines)
    problems = [*checked.diagnostics, *(problem for check in engines.checks for problem in check(spec))]
    if problems:
        raise SpecError(list(dict.fromkeys(problems)))  # two engines' checks may find one problem
    return spec
