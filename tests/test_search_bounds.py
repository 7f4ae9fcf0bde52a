"""A search block's variables must make a space the optimisers can model (#40 item 19): `max: .inf` used to
put every trial at inf, `min: .nan` gave a search that never explored, `size: 100000000` a scipy traceback.
`dagflow validate` refuses each, naming file:line:column and the field, with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_local_support import dagflow_cli

PIPELINE = """name: s
params: {x: 0.0, y: 0.0}
steps:
  evaluate:
    kind: evaluate
    command: python objective.py {params.x} out/{run.id}/metrics.json
    metrics: out/{run.id}/metrics.json
search:
  objective: {metric: loss}
  variables:
    x: {type: FLOAT, X}
    y: {type: FLOAT, min: 0, max: 1, size: 600}
"""

CASES = {  # what x's definition holds: what validate says after "pipeline.yaml:"
    "min: 0, max: .inf": "11:35: search.variables.x.max: a bound must be a finite number, not inf",
    "min: -.inf, max: 1": "11:27: search.variables.x.min: a bound must be a finite number, not -inf",
    "min: .nan, max: 1": "11:27: search.variables.x.min: a bound must be a finite number, not nan",
    "min: 0, max: 1, size: 100000000": "11:44: search.variables.x.size: size must be at most 1000, not 100000000",
    "min: 0, max: 1, size: 600": "11:5: search.variables: 1200 dimensions in all (each element of a variable",
}


@pytest.mark.parametrize("definition", sorted(CASES))
def test_validate_refuses_a_space_the_optimisers_cannot_model(tmp_path: Path, definition: str) -> None:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE.replace("X}", definition + "}"))
    result = dagflow_cli("validate", "pipeline.yaml", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert f"pipeline.yaml:{CASES[definition]}" in result.stdout + result.stderr, result.stdout + result.stderr


def test_validate_accepts_the_largest_space(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE.replace("X}", "min: -1e300, max: 1e300, size: 400}"))
    result = dagflow_cli("validate", "pipeline.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
