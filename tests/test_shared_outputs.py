"""Two nodes may not write the same output (or metrics file), nor one write a directory holding another's:
checked on the expanded plan, so on every engine, located at the field."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_local_support import cli_env

from dagflow.errors import SpecError
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.spec import parse_spec

# make.us and make.br both write value.txt: use.us would read whichever ran last (br's, say)
FANNED = """\
name: x
matrix:
  region: [us, br]
steps:
  make:
    command: [sh, -c, 'echo {region} > value.txt']
    outputs: [value.txt]
  use:
    needs: [make]
    command: [sh, -c, 'cat value.txt > seen.{region}']
    inputs: [value.txt]
    outputs:
      - seen.{region}
"""


def plan_of(text: str) -> Plan:
    return expand(parse_spec(textwrap.dedent(text), "p.yaml"), run_id="r1")


def errors_of(text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        plan_of(text)
    return [d.render() for d in caught.value.diagnostics]


def one_error(text: str) -> str:
    rendered = errors_of(text)
    assert len(rendered) == 1, rendered
    return rendered[0]


def test_fanned_out_nodes_writing_one_output_are_refused() -> None:
    message = one_error(FANNED)
    assert message.startswith("p.yaml:7:15: steps.make.outputs[0]: "), message
    assert "make.us" in message and "make.br" in message and "'value.txt'" in message
    assert message.endswith("; put {region} in the path, so that each node writes its own")


def test_fanned_out_nodes_writing_one_metrics_file_are_refused() -> None:
    message = one_error("""\
        name: x
        matrix: {region: [us, br, de]}
        steps:
          evaluate:
            command: python eval.py --out metrics.json
            metrics: metrics.json
        """)
    assert message.startswith("p.yaml:6:14: steps.evaluate.metrics: "), message
    assert "evaluate.us" in message and "evaluate.br" in message and "'metrics.json'" in message


def test_two_steps_writing_one_file_name_both_nodes_and_the_other_field() -> None:
    message = one_error("""\
        name: x
        steps:
          a:
            command: make-it
            outputs: [out/x.txt]
          b:
            command: make-it-too
            outputs: [other.txt, ./out//x.txt]
        """)
    assert message.startswith("p.yaml:8:26: steps.b.outputs[1]: "), message
    assert "node b" in message and "node a" in message and "steps.a.outputs[0] at p.yaml:5:15" in message


@pytest.mark.parametrize("directory", ["models", "models/", "./models"])
def test_a_directory_holding_another_nodes_output_is_refused(directory: str) -> None:
    message = one_error(f"""\
        name: x
        matrix: {{region: [us, br]}}
        steps:
          train:
            command: train {{region}}
            outputs:
              - models/{{region}}/model.pkl
          bundle:
            needs: [train]
            over: [region]
            command: bundle
            outputs: [{directory}]
        """)
    assert "steps.train.outputs[0]" in message and "'models/us/model.pkl'" in message, message
    assert "node bundle" in message and "steps.bundle.outputs[0] at p.yaml:12:" in message


def test_distinct_paths_a_nodes_own_files_and_look_alike_prefixes_are_accepted() -> None:
    plan = plan_of("""\
        name: x
        matrix: {region: [us, usa]}
        steps:
          train:
            command: train {region}
            outputs:
              - models/{region}
              - models/{region}/model.pkl
            metrics: models/{region}/metrics.json
          report:
            needs: [train]
            over: [region]
            command: report
            outputs: [reports/all.md]
        """)
    assert plan.nodes["train.usa"].outputs == ["models/usa", "models/usa/model.pkl"]


def test_a_thousand_nodes_sharing_one_output_is_one_error() -> None:
    values = ", ".join(f"v{index}" for index in range(1000))
    message = one_error(f"""\
        name: x
        matrix: {{shard: [{values}]}}
        steps:
          a:
            command: work {{shard}}
            outputs: [out.txt]
        """)
    assert "node a.v1 " in message and "node a.v0 " in message, message
    assert "put {shard} in the path" in message


def test_validate_and_run_refuse_nodes_sharing_an_output(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(FANNED)
    for command in ("validate", "run"):
        result = subprocess.run([sys.executable, "-m", "dagflow", command, "p.yaml"], cwd=tmp_path, env=cli_env(),
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert result.stderr.startswith("p.yaml:7:15: steps.make.outputs[0]: "), result.stderr
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "seen.us").exists()  # nothing ran
