"""`--only AXIS=VALUE` and `--set NAME=VALUE` on run, submit, plan and compile ("retrain only us now",
"try alpha=0.5"): through the CLI, on real files. The overrides are recorded in the run (plan.json, status),
an overridden param is a different cache key, and a resume keeps them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_local_support import dagflow_cli

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "region-retrain"

# Two axes; `fit` uses params.alpha, `prep` uses no param, `summary` gathers over region.
PIPELINE = """\
name: tiny
matrix:
  region: [us, br, de]
  size: [small, big]
params: {alpha: 1.0, tag: plain}
steps:
  prep:
    command: [python, -c, "open('prep-{region}-{size}.txt', 'w').write('x')"]
  fit:
    needs: [prep]
    command: [python, -c, "open('fit-{region}-{size}.txt', 'w').write('{params.alpha}')"]
  summary:
    needs: [fit]
    over: [region]
    command: [python, -c, "print('summary {size}')"]
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    return tmp_path


def _plan(workdir: Path, *options: str) -> dict:
    result = dagflow_cli("plan", "pipeline.yaml", "--json", *options, cwd=workdir)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _status(workdir: Path, run: str = "latest") -> dict:
    result = dagflow_cli("status", run, "--json", cwd=workdir)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
def test_only_values_of_one_axis_add_up_and_axes_narrow(tiny: Path) -> None:
    one = _plan(tiny, "--only", "region=us")
    assert sorted(node["name"] for node in one["nodes"]) == [
        "fit.us.big", "fit.us.small", "prep.us.big", "prep.us.small",
    ]  # fmt: skip
    union = _plan(tiny, "--only", "region=us", "--only", "region=br", "--only", "size=big")
    assert sorted(node["name"] for node in union["nodes"]) == ["fit.br.big", "fit.us.big", "prep.br.big", "prep.us.big"]
    assert union["overrides"] == {"only": {"region": ["us", "br"], "size": ["big"]}}
    every_region = _plan(tiny, "--only", "size=big")  # a gather whose every parent is kept stays
    assert "summary.big" in {node["name"] for node in every_region["nodes"]}
    assert "summary.small" not in {node["name"] for node in every_region["nodes"]}


@pytest.mark.slow
def test_set_reads_a_yaml_scalar_and_changes_only_the_nodes_that_use_it(tiny: Path) -> None:
    plain = {node["name"]: node for node in _plan(tiny)["nodes"]}
    changed = {node["name"]: node for node in _plan(tiny, "--set", "alpha=0.5")["nodes"]}
    assert changed["fit.us.small"]["params"]["alpha"] == 0.5  # a number, not the text "0.5"
    assert "write('0.5')" in changed["fit.us.small"]["argv"][-1]
    assert changed["prep.us.small"] == plain["prep.us.small"]  # no param used: the same node, the same key
    assert _plan(tiny, "--set", "tag=true")["overrides"] == {"set": {"tag": True}}


@pytest.mark.slow
def test_every_node_records_the_params_it_ran_with(tiny: Path) -> None:
    """--set alpha=0.5 recorded alpha: 1.0 on the nodes that do not use it (#42 item 7): a node records the
    params its command names, at this run's values, in `plan --json` and in the run's plan.json."""
    result = dagflow_cli("run", "pipeline.yaml", "--set", "alpha=0.5", "--jobs", "2", cwd=tiny)
    assert result.returncode == 0, result.stderr
    (run_dir,) = (tiny / ".dagflow" / "runs").glob("tiny-*")
    recorded = json.loads((run_dir / "plan.json").read_text())["nodes"]
    for nodes in (_plan(tiny, "--set", "alpha=0.5")["nodes"], recorded):
        assert {node["name"]: node["params"] for node in nodes} == {
            node["name"]: {"alpha": 0.5} if node["step"] == "fit" else {} for node in nodes
        }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--set", "beta=1"], "--set beta: 'beta' is not a param of pipeline.yaml (its params: alpha, tag)"),
        (["--set", "alpah=1"], "did you mean 'alpha'?"),
        (["--set", "alpha"], "--set 'alpha': expected NAME=VALUE, e.g. alpha=0.5"),
        (["--set", "alpha=[1, 2]"], "--set alpha=[1, 2]: expected one value"),
        (["--set", "alpha=a\nb"], "control characters"),
        (["--only", "zone=us"], "'zone' is not a matrix axis of pipeline.yaml (its axes: region, size)"),
        (["--only", "region=fr"], "'fr' is not a value of region in pipeline.yaml (its values: us, br, de)"),
        (["--only", "region"], "--only 'region': expected AXIS=VALUE, e.g. region=us"),
    ],
)
def test_bad_overrides_are_usage_errors(tiny: Path, options: list[str], message: str) -> None:
    for command in (["plan", "pipeline.yaml"], ["run", "pipeline.yaml"], ["compile", "pipeline.yaml", "-o", "out"]):
        result = dagflow_cli(*command, *options, cwd=tiny)
        assert result.returncode == 2, (command, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, (command, result.stderr)
    assert not (tiny / ".dagflow" / "runs").exists()  # refused before anything was written


def test_resume_refuses_new_overrides(tiny: Path) -> None:
    result = dagflow_cli("run", "--resume", "latest", "--only", "region=us", cwd=tiny)
    assert result.returncode == 2
    assert "--resume continues an existing run as it was planned" in result.stderr


@pytest.mark.slow
def test_an_overridden_param_is_a_different_cache_key_and_is_recorded(tiny: Path) -> None:
    first = dagflow_cli("run", "pipeline.yaml", "--only", "region=us", "--only", "size=small", cwd=tiny)
    assert first.returncode == 0, first.stderr
    assert (tiny / "fit-us-small.txt").read_text() == "1.0"

    changed = dagflow_cli(
        "run", "pipeline.yaml", "--only", "region=us", "--only", "size=small", "--set", "alpha=0.5", cwd=tiny
    )
    assert changed.returncode == 0, changed.stderr
    status = _status(tiny)
    assert {node["node"]: node["state"] for node in status["nodes"]} == {
        "prep.us.small": "cached", "fit.us.small": "succeeded",
    }  # fmt: skip
    assert (tiny / "fit-us-small.txt").read_text() == "0.5"
    assert status["overrides"] == {"only": {"region": ["us"], "size": ["small"]}, "set": {"alpha": 0.5}}
    shown = dagflow_cli("status", cwd=tiny)
    assert "overrides: --only region=us --only size=small --set alpha=0.5" in shown.stdout

    again = dagflow_cli(
        "run", "pipeline.yaml", "--only", "region=us", "--only", "size=small", "--set", "alpha=0.5", cwd=tiny
    )
    assert again.returncode == 0, again.stderr
    assert {node["state"] for node in _status(tiny)["nodes"]} == {"cached"}


@pytest.mark.slow
def test_a_resume_after_an_edit_keeps_the_overrides(tiny: Path) -> None:
    """The run's fit fails; the pipeline is fixed; `--resume` re-plans it with the run's own overrides."""
    broken = PIPELINE.replace("write('{params.alpha}')", "write('{params.alpha}'); raise SystemExit(3)")
    (tiny / "pipeline.yaml").write_text(broken)
    failed = dagflow_cli(
        "run", "pipeline.yaml", "--run-id", "r1", "--only", "region=br", "--set", "alpha=0.25", cwd=tiny
    )
    assert failed.returncode == 1, failed.stderr
    (tiny / "pipeline.yaml").write_text(PIPELINE)
    resumed = dagflow_cli("run", "--resume", "r1", cwd=tiny)
    assert resumed.returncode == 0, resumed.stderr
    plan = json.loads((tiny / ".dagflow" / "runs" / "r1" / "plan.json").read_text())
    assert sorted(node["name"] for node in plan["nodes"]) == [
        "fit.br.big", "fit.br.small", "prep.br.big", "prep.br.small",
    ]  # fmt: skip
    assert (tiny / "fit-br-big.txt").read_text() == "0.25"
    assert plan["overrides"] == {"only": {"region": ["br"]}, "set": {"alpha": 0.25}}


@pytest.mark.slow
def test_retrain_only_us_with_another_alpha(tmp_path: Path) -> None:
    """The issue's acceptance: the region-retrain example's us branch with alpha 0.5, then fully cached."""
    pytest.importorskip("sklearn")
    workdir = tmp_path / "region-retrain"
    shutil.copytree(EXAMPLE, workdir, ignore=shutil.ignore_patterns("data", "models", "reports", ".dagflow"))
    command = ("run", "pipeline.yaml", "--only", "region=us", "--set", "alpha=0.5")
    first = dagflow_cli(*command, cwd=workdir)
    assert first.returncode == 0, first.stdout + first.stderr
    plan = json.loads(next((workdir / ".dagflow" / "runs").glob("*/plan.json")).read_text())
    assert [node["name"] for node in plan["nodes"]] == ["stage.us", "train.us", "evaluate.us"]
    train = plan["nodes"][1]
    assert train["params"]["alpha"] == 0.5 and train["argv"][train["argv"].index("--alpha") + 1] == "0.5"
    assert json.loads((workdir / "models" / "us" / "train.json").read_text())["params"]["alpha"] == 0.5

    second = dagflow_cli(*command, cwd=workdir)
    assert second.returncode == 0, second.stdout + second.stderr
    assert {node["state"] for node in _status(workdir)["nodes"]} == {"cached"}


@pytest.mark.slow
def test_a_command_naming_its_own_output_is_cached_on_the_next_run(tmp_path: Path) -> None:
    """`python eval.py --out models/us/metrics.json`: the output named on the command line is what the node
    writes, not a script it runs; once written it must not change the node's key (the example's evaluate
    step reran on every second run, and the report after it)."""
    (tmp_path / "write.py").write_text("import sys\nopen(sys.argv[2], 'w').write('done')\n")
    (tmp_path / "pipeline.yaml").write_text(
        "name: own\nsteps:\n  write:\n    command: python write.py --out out/result.txt\n"
        "    outputs: [out/result.txt]\n  after:\n    needs: [write]\n    command: python -c pass\n"
    )
    (tmp_path / "out").mkdir()
    for _ in range(2):
        assert dagflow_cli("run", "pipeline.yaml", cwd=tmp_path).returncode == 0
    assert {node["node"]: node["state"] for node in _status(tmp_path)["nodes"]} == {
        "write": "cached", "after": "cached",
    }  # fmt: skip
