"""Validation messages speak the pipeline's language, never pydantic's (issue #30, item 5).

A fuzzer puts a value of the wrong type (text where a number goes, a list where a mapping goes, a
mapping where text goes, ...) into each field of the pipeline schema, found by walking the spec models,
and checks every message: located (file:line:column), naming the field, and free of the models' class
names and of pydantic's own words."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from test_local_support import cli_env

from dagflow.engines.registry import spec_checks
from dagflow.errors import SpecError
from dagflow.spec import model as spec_model
from dagflow.spec import parse_spec

BASE = """\
name: fuzz
matrix: {region: [us, br]}
params: {lr: 0.01}
steps:
  train:
    kind: train
    command: python train.py --lr {params.lr} --out models/{region}/
    outputs: ['models/{region}/']
    resources: {cpus: 1, memory: 1GB}
    retries: {count: 1, unless_exit: [3]}
    checkpoint: {files: [ckpt/]}
    runtime: {python: /usr/bin/python3}
    publish: s3://bucket/models/{region}/{run.id}/
  evaluate:
    kind: evaluate
    needs: [train]
    command: python eval.py models/{region}/
    metrics: metrics.json
    promote_if: {metric: auc, better: higher, than: 's3://bucket/models/{region}/latest'}
search:
  objective: {metric: auc, goal: maximize}
  variables: {lr: {type: FLOAT, min: 0.001, max: 0.1}}
  early_stopping: {rule: median}
schedule: {cron: '0 3 * * *'}
runtime: {python: /usr/bin/python3}
condor: {data_mode: transfer}
"""
SAMPLE_KEYS = {"steps": "train", "variables": "lr", "matrix": "region", "params": "lr"}
CLASS_NAMES = sorted(
    name for name, value in vars(spec_model).items()
    if inspect.isclass(value) and issubclass(value, BaseModel) and value.__module__ == spec_model.__name__
)  # fmt: skip
PYDANTIC_WORDS = ("instance of", "model_type", "input should", "valid dictionary", "pydantic")
LOCATED = re.compile(r"^fuzz\.yaml:[1-9]\d*:[1-9]\d*: (\S+): \S")


def _models(annotation: Any) -> Iterator[tuple[type[BaseModel], bool]]:
    """The spec models an annotation holds, each with whether it sits under a mapping's keys."""
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        yield annotation, False
        return
    under_keys = typing.get_origin(annotation) is dict
    for argument in typing.get_args(annotation):
        for found, keyed in _models(argument):
            yield found, keyed or under_keys


def _fields(model: type[BaseModel], path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, field in model.model_fields.items():
        key = field.alias or name
        yield (*path, key)
        if key in SAMPLE_KEYS:
            yield (*path, key, SAMPLE_KEYS[key])
        for nested, keyed in _models(field.annotation):
            yield from _fields(nested, (*path, key, SAMPLE_KEYS[key]) if keyed else (*path, key))


FIELDS = sorted(set(_fields(spec_model.PipelineSpec)))
# Text the fuzzer writes cannot spell a class name or "instance of" (no capitals, no spaces).
words = st.text(alphabet="abcxyz0123456789._-/", max_size=8)
wrong_values = st.one_of(
    words,
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.lists(st.one_of(words, st.integers(-5, 5)), max_size=3),
    st.dictionaries(st.text(alphabet="abcxyz", min_size=1, max_size=5), st.one_of(words, st.integers()), max_size=3),
)


def _with(path: tuple[str, ...], value: Any) -> str:
    document = yaml.safe_load(BASE)
    container = document
    for key in path[:-1]:
        container = container.setdefault(key, {}) if isinstance(container.get(key), dict | None) else {}
    container[path[-1]] = value
    return yaml.safe_dump(document, sort_keys=False)


def _check_messages(error: SpecError) -> None:
    """Every message located, naming its field, in the pipeline's words. (A valid but emptying value,
    such as `matrix: {}`, may show up only elsewhere: `{region}` is then unknown in a command.)"""
    for diagnostic in error.diagnostics:
        text = diagnostic.render()
        located = LOCATED.match(text)
        assert located and located.group(1) != "<document>", f"not located at a field: {text!r}"
        for word in (*CLASS_NAMES, *PYDANTIC_WORDS):
            assert word not in text, f"{word!r} in {text!r}"


def test_the_base_pipeline_is_valid_and_every_model_is_reached() -> None:
    parse_spec(BASE, "fuzz.yaml", engines=spec_checks())
    assert {"StepSpec", "RetrySpec", "ResourcesSpec", "VariableSpec", "PromoteSpec"} <= set(CLASS_NAMES)
    assert ("steps", "train", "retries", "unless_exit") in FIELDS and ("search", "variables", "lr", "min") in FIELDS


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(FIELDS), value=wrong_values)
def test_a_wrong_value_in_any_field_is_said_in_the_pipeline_s_language(path: tuple[str, ...], value: Any) -> None:
    try:
        parse_spec(_with(path, value), "fuzz.yaml", engines=spec_checks())
    except SpecError as error:
        _check_messages(error)


def test_retries_two_at_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(BASE.replace("retries: {count: 1, unless_exit: [3]}", "retries: two"))
    done = subprocess.run(
        [sys.executable, "-m", "dagflow", "validate", "p.yaml"], cwd=tmp_path, env=cli_env(), capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    expected = (
        "p.yaml:10:14: steps.train.retries: expected a number such as 2, or a mapping such as "
        "{count: 2, unless_exit: [3]}, not 'two'"
    )
    assert expected in done.stdout + done.stderr, done.stdout + done.stderr
    assert "RetrySpec" not in done.stdout + done.stderr
