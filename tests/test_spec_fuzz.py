"""Fuzzing the loader: random documents and mutations of real pipelines either give a valid plan or a
clean SpecError (exit code 2 at the command line). Anything else is a bug."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagflow.errors import SpecError
from dagflow.plan.expand import expand
from dagflow.spec import parse_spec

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = [ROOT / "tests" / "data" / "design_sketch.yaml", *sorted(ROOT.glob("examples/*/pipeline.yaml"))]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(["{region}", "{params.lr}", "16GB", "train", "us", "$(ENV(HOME))"]),
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(
                st.text(max_size=10),
                st.sampled_from(["name", "steps", "matrix", "params", "kind", "needs", "over", "command", "resources"]),
            ),
            children,
            max_size=5,
        ),
    ),
    max_leaves=25,
)


def outcome(text: str) -> None:
    """The property under test: a plan, or a SpecError whose every diagnostic is located and rendered."""
    try:
        spec = parse_spec(text, "fuzz.yaml")
    except SpecError as error:
        assert error.diagnostics
        for diagnostic in error.diagnostics:
            assert diagnostic.render().startswith("fuzz.yaml")
        return
    try:
        expand(spec, run_id="fuzz")
    except SpecError as error:
        assert error.diagnostics


@FUZZ
@given(st.text(max_size=300))
def test_random_text(text: str) -> None:
    outcome(text)


@pytest.mark.slow
@FUZZ
@given(documents)
def test_random_documents(document: Any) -> None:
    outcome(yaml.safe_dump(document, allow_unicode=True))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


@pytest.mark.slow
@FUZZ
@given(st.sampled_from(EXAMPLES), st.data())
def test_mutated_examples(example: Path, data: st.DataObject) -> None:
    document = yaml.safe_load(example.read_text())
    for _ in range(data.draw(st.integers(1, 4))):
        paths = [p for p in _paths(document) if p]
        path = data.draw(st.sampled_from(paths))
        parent = document
        for part in path[:-1]:
            parent = parent[part]
        action = data.draw(st.sampled_from(["delete", "replace", "insert"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "replace":
            parent[path[-1]] = data.draw(documents)
        elif isinstance(parent, dict):
            parent[data.draw(st.text(max_size=8))] = data.draw(documents)
        else:
            parent.insert(0, copy.deepcopy(data.draw(documents)))
    outcome(yaml.safe_dump(document, allow_unicode=True))


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(st.text(max_size=200))
def test_command_line_exits_0_or_2_without_traceback(tmp_path_factory: Any, text: str) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "pipeline.yaml"
    path.write_text(text, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "dagflow", "validate", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode in (0, 2), result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
@FUZZ
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(1, 12), st.booleans()), min_size=1, max_size=14))
def test_alias_graphs_load_or_fail_cleanly(levels: list[tuple[int, int, bool]]) -> None:
    """Anchors used many times, as lists or merge keys: a located SpecError (a limit) or a document, never a hang."""
    lines = ["name: p", "steps:", "  a: {command: echo}", "x0: &x0 {k: [lol, lol]}"]
    for index, (back, width, merge) in enumerate(levels, 1):
        target = f"x{max(0, index - 1 - back)}"
        items = [f"m{j}: {{<<: *{target}}}" for j in range(width)] if merge else [f"*{target}"] * width
        body = "{" + ", ".join(items) + "}" if merge else "[" + ", ".join(items) + "]"
        lines.append(f"x{index}: &x{index} {body}")
    outcome("\n".join(lines) + "\n")
