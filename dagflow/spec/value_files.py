"""A step's coordinate combinations read from a file beside the pipeline (`matrix: {include: FILE}`).

CSV (a header row names the axes), JSON (a list of objects) or YAML (a list of mappings), by the file's
suffix. Each row is one combination; its values are matrix values (the Row type of spec/model.py checks
them, here with the file's own line numbers).
"""

from __future__ import annotations

import csv
import functools
import io
import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from dagflow.errors import SpecError
from dagflow.spec.model import MATRIX_VALUE_HELP, Row
from dagflow.spec.schema_messages import schema_message
from dagflow.spec.yamlpos import load_yaml
from dagflow.text import plural

MAX_BYTES = 64 * 1024 * 1024
SUFFIXES = {".csv": "CSV", ".json": "JSON", ".yaml": "YAML", ".yml": "YAML"}


@functools.cache
def _row_type() -> TypeAdapter[dict[str, str]]:
    """Row's validator, built when a values file is first read (most pipelines have none)."""
    return TypeAdapter(Row)


class ValueFileError(ValueError):
    """Why a values file cannot be used, naming its file:line where a line is to blame."""


def read_rows(path: Path, shown: str) -> list[dict[str, Any]]:
    """The rows of the values file at path (`shown`: its name as the pipeline gives it)."""
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueFileError(f"{shown}: a values file is .csv (a header row, then one row per combination), "
                             ".json or .yaml (a list of mappings)")
    try:
        if path.stat().st_size > MAX_BYTES:
            raise ValueFileError(f"{shown}: larger than {MAX_BYTES // (1024 * 1024)} MB")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueFileError(f"{shown}: no such file (relative paths start at the pipeline's directory)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueFileError(f"{shown}: cannot read it: {exc}") from None
    rows, lines = _csv(text, shown) if kind == "CSV" else _structured(text, shown, kind)
    if not rows:
        raise ValueFileError(f"{shown}: no rows")
    checked = []
    for row, line in zip(rows, lines, strict=True):
        where = f"{shown}:{line}" if line else f"{shown}: row {len(checked) + 1}"
        try:
            checked.append(_row_type().validate_python(row))
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            column = next((str(part) for part in error["loc"] if isinstance(part, str)), "")
            allowed = f" (allowed: {MATRIX_VALUE_HELP})" if error["type"] == "string_pattern_mismatch" else ""
            raise ValueFileError(f"{where}: {column or 'row'}: {schema_message([error], ())}{allowed}") from None
    return checked


def _csv(text: str, shown: str) -> tuple[list[dict[str, Any]], list[int]]:
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    try:
        for record in reader:
            if not any(field.strip() for field in record):
                continue
            if header is None:
                header = [field.strip() for field in record]
                continue
            if len(record) != len(header):
                raise ValueFileError(f"{shown}:{reader.line_num}: {plural(len(record), 'field')}, but the header "
                                     f"names {len(header)} ({', '.join(header)})")
            rows.append(dict(zip(header, (field.strip() for field in record), strict=True)))
            lines.append(reader.line_num)
    except csv.Error as exc:
        raise ValueFileError(f"{shown}:{reader.line_num}: not CSV: {exc}") from None
    return rows, lines


def _structured(text: str, shown: str, kind: str) -> tuple[list[dict[str, Any]], list[int]]:
    if kind == "JSON":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueFileError(f"{shown}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
        lines = [0] * len(data) if isinstance(data, list) else []
    else:
        try:
            data, positions = load_yaml(text, shown)
        except SpecError as exc:
            raise ValueFileError(exc.diagnostics[0].render()) from None
        lines = [positions.of((index,))[0] for index in range(len(data))] if isinstance(data, list) else []
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise ValueFileError(f"{shown}: expected a list of mappings such as [{{a: m1, b: m2}}]")
    return data, lines
