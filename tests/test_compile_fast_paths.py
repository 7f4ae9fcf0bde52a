"""The shortcuts that keep a 100k-node compile fast give the answers of the plain way.

Expansion fills a step's params, run id and names into its templates once and renders only the matrix
coordinates per node; the DAG writer fills each node's block from per-step pieces; transfer mode answers
"is this command word a file?" from a per-compile memo that skips the stat under a missing directory.
"""

from __future__ import annotations

import posixpath
import textwrap
from pathlib import Path

from dagflow.engines.condor.compile import compile_plan
from dagflow.engines.condor.transfer import ScriptFiles
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.spec import parse_spec

MIXED = """\
    name: mix
    matrix: {region: [us, br], trial: ["0", "7", x]}
    params: {lr: 0.5, tag: "a b"}
    steps:
      train:
        command: >-
          python train.py --out out/{params.lr}/{region}-{run.id} --tag {step}{region}{trial}
          '{params.tag}' --fixed {pipeline}
        env: {OUT: "o/{region}/{params.lr}", LR: "{params.lr}"}
        outputs: ["res/{region}/{params.lr}-{trial}.json", "res/{run.id}-{region}-{trial}.log"]
        metrics: "m/{region}/{trial}.json"
        retries: {count: 2, unless_exit: [3]}
        priority: 5
        resources: {gpus: 1}
      report:
        needs: [train]
        over: [region]
        command: python report.py {trial} {params.lr}
"""


def plan_of(text: str, **options: object) -> Plan:
    return expand(parse_spec(textwrap.dedent(text), "p.yaml"), run_id="r9", **options)  # type: ignore[arg-type]


def test_templates_mixing_step_values_and_coordinates_render_whole() -> None:
    plan = plan_of(MIXED)
    node = plan.nodes["train.br.7"]
    assert node.argv == [
        "python", "train.py", "--out", "out/0.5/br-r9", "--tag", "trainbr7", "a b", "--fixed", "mix",
    ]  # fmt: skip
    assert node.env == {"OUT": "o/br/0.5", "LR": "0.5"}
    assert node.outputs == ["res/br/0.5-7.json", "res/r9-br-7.log"]
    assert node.metrics == "m/br/7.json"
    assert node.coords == {"region": "br", "trial": "7"}
    assert plan.nodes["report.x"].argv == ["python", "report.py", "x", "0.5"]
    assert sorted(plan.nodes["report.x"].parents) == ["train.br.x", "train.us.x"]


def test_trial_numbers_come_from_the_trial_axis_or_the_search_trial() -> None:
    plan = plan_of(MIXED)
    assert [plan.nodes[f"train.us.{trial}"].trial for trial in ("0", "7", "x")] == [0, 7, None]
    searched = plan_of(MIXED, params={"lr": 0.25}, trial=4)
    assert {node.trial for node in searched.nodes.values()} == {4}
    assert searched.nodes["train.us.x"].argv[3] == "out/0.25/us-r9"
    assert searched.nodes["train.us.x"].env["LR"] == "0.25"
    assert searched.nodes["report.0"].argv == ["python", "report.py", "0", "0.25"]


def test_each_node_block_has_its_lines_in_order(tmp_path: Path) -> None:
    dag = compile_plan(plan_of(MIXED), tmp_path / "out", data_mode="shared").read_text()
    block = dag[dag.index("JOB train.us.7 ") :].split("\nJOB ")[0].splitlines()
    assert block[0] == f"JOB train.us.7 {tmp_path / 'out' / 'train.sub'}"
    assert block[1] == (
        "VARS train.us.7 DagflowArgs=\"'python' 'train.py' '--out' 'out/0.5/us-r9' '--tag' 'trainus7' 'a b' "
        "'--fixed' 'mix'\" DagflowEnv=\"OUT='o/us/0.5' LR='0.5'\" DagflowRegion=\"\\\"us\\\"\" "
        'DagflowTrial="\\"7\\""'
    )
    assert block[2:] == ["RETRY train.us.7 2 UNLESS-EXIT 3", "PRIORITY train.us.7 5", "CATEGORY train.us.7 gpu"]
    report = dag[dag.index("JOB report.x ") :].splitlines()
    assert report[1] == (
        "VARS report.x DagflowArgs=\"'python' 'report.py' 'x' '0.5'\" DagflowEnv=\"\" DagflowTrial=\"\\\"x\\\"\""
    )
    assert report[2] == "PARENT train.us.x train.br.x CHILD report.x"


def _reference(word: str, workdir: Path) -> str | None:
    """The plain answer: the word (or an --opt=VALUE value), normalised, if it is a file under workdir."""
    candidate = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
    if not candidate or candidate.startswith(("-", "/")) or "://" in candidate:
        return None
    normal = posixpath.normpath(candidate)
    if normal.startswith("../") or normal in (".", ".."):
        return None
    try:
        return normal if (workdir / normal).is_file() else None
    except (OSError, ValueError):  # too long a name, a NUL
        return None


def test_script_files_answer_as_a_stat_of_every_word_would(tmp_path: Path) -> None:
    (tmp_path / "conf" / "deep").mkdir(parents=True)
    (tmp_path / "train.py").write_text("")
    (tmp_path / "conf" / "deep" / "a.yaml").write_text("")
    (tmp_path / "plain").write_text("")  # a file where a word expects a directory
    (tmp_path / "linked").symlink_to(tmp_path / "conf")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    words = [
        "python", "train.py", "./train.py", "conf", "conf/", "conf/deep/a.yaml", "conf/deep/../deep/a.yaml",
        "linked/deep/a.yaml", "dangling", "dangling/x", "plain", "plain/x", "missing/deep/x.yaml",
        "--config=conf/deep/a.yaml", "--out=missing/x", "-v", "../train.py", "/etc/hostname", "s3://b/train.py",
        "", ".", "a\x00b", "x" * 5000, "conf/deep/a.yaml",
    ]  # fmt: skip
    expected = [found for word in words if (found := _reference(word, tmp_path)) is not None]
    assert expected == ["train.py", "train.py", "conf/deep/a.yaml", "conf/deep/a.yaml", "linked/deep/a.yaml",
                        "plain", "conf/deep/a.yaml", "conf/deep/a.yaml"]  # fmt: skip
    probe = ScriptFiles(tmp_path)
    assert probe(words) == expected
    assert probe(words) == expected  # answered from the memo the second time
    # a directory that appears later in the same compile is not seen (one compile, one view of the disk),
    # but a new compile sees it
    (tmp_path / "missing" / "deep").mkdir(parents=True)
    (tmp_path / "missing" / "deep" / "x.yaml").write_text("")
    assert "missing/deep/x.yaml" not in probe(["missing/deep/x.yaml"])
    assert ScriptFiles(tmp_path)(["missing/deep/x.yaml"]) == ["missing/deep/x.yaml"]
