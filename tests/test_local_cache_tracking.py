"""What a node's cache key sees, on real runs of real pipelines: the files a shell's `-c` script and
`python -m` run and the pipeline's modules a script imports; a transfer step's source; what a node
produced (its metrics file, a publish destination) and what a symlinked directory inside an input holds.
And a fresh pipeline's second run is wholly cached, although its first run made the files its commands
name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from local_run import run_local

from dagflow.engines.local import RunOptions
from dagflow.plan.expand import expand
from dagflow.spec import load_spec


class Project:
    """A pipeline directory and its runs, each run with a new id (a plain `dagflow run`)."""

    def __init__(self, root: Path, pipeline: str) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        (root / "pipeline.yaml").write_text(pipeline)
        self.runs = 0

    def write(self, name: str, text: str) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def run(self) -> dict[str, str]:
        self.runs += 1
        plan = expand(load_spec(self.root / "pipeline.yaml"), run_id=f"r{self.runs}")
        result = run_local(plan, RunOptions(runs_dir=self.root / ".dagflow" / "runs", jobs=2, kill_grace_s=0.5))
        assert result.ok, result.failures
        return dict(result.states)

    def log(self) -> list[str]:
        path = self.root / "ran.log"
        return path.read_text().split() if path.exists() else []


def test_editing_the_script_a_shell_command_runs_reruns_it(tmp_path: Path) -> None:
    project = Project(tmp_path, """\
name: shelled
steps:
  a:
    command: [sh, -c, "python a.py > out.txt"]
    outputs: [out.txt]
""")
    project.write("a.py", "print('v1')\n")
    assert project.run() == {"a": "succeeded"}
    assert project.run() == {"a": "cached"}
    project.write("a.py", "print('v2')\n")
    assert project.run() == {"a": "succeeded"}
    assert (tmp_path / "out.txt").read_text() == "v2\n"


def test_editing_a_module_run_with_python_m_or_imported_by_a_script_reruns_its_node(tmp_path: Path) -> None:
    project = Project(tmp_path, """\
name: modules
steps:
  m:
    command: python -m tools.make
  s:
    command: python train.py
""")
    project.write("tools/__init__.py", "")
    project.write("tools/make.py", "open('ran.log', 'a').write('m\\n')\n")
    project.write("train.py", "import helpers\nfrom lib import util\nopen('ran.log', 'a').write('s\\n')\n")
    project.write("helpers.py", "X = 1\n")
    project.write("lib/__init__.py", "")
    project.write("lib/util.py", "from . import deep\n")
    project.write("lib/deep.py", "Y = 1\n")
    assert project.run() == {"m": "succeeded", "s": "succeeded"}
    assert project.run() == {"m": "cached", "s": "cached"}
    project.write("tools/make.py", "open('ran.log', 'a').write('m2\\n')\n")
    assert project.run() == {"m": "succeeded", "s": "cached"}
    project.write("helpers.py", "X = 2\n")
    assert project.run() == {"m": "cached", "s": "succeeded"}
    project.write("lib/deep.py", "Y = 2\n")  # imported by a module the script imports, relatively
    assert project.run() == {"m": "cached", "s": "succeeded"}
    assert project.run() == {"m": "cached", "s": "cached"}
    assert sorted(project.log()) == sorted(["m", "s", "m2", "s", "s"])


def test_the_second_run_of_a_fresh_pipeline_is_wholly_cached(tmp_path: Path) -> None:
    project = Project(tmp_path, """\
name: fresh
matrix:
  region: [us, br]
steps:
  prep:
    command: sh -c 'mkdir -p data/{region}; echo {region} > data/{region}/data.csv' --out data/{region}/data.csv
    outputs:
      - data/{region}/data.csv
  train:
    needs: [prep]
    command: python train.py data/{region}/data.csv
""")
    project.write("train.py", "import sys\nopen('ran.log', 'a').write(open(sys.argv[1]).read())\n")
    assert set(project.run().values()) == {"succeeded"}
    assert set(project.run().values()) == {"cached"}, "the first run's keys saw the files it made"
    assert sorted(project.log()) == ["br", "us"]


def test_a_deleted_metrics_file_or_publish_destination_reruns_its_node(tmp_path: Path) -> None:
    project = Project(tmp_path, """\
name: produced
steps:
  train:
    kind: train
    command: sh -c 'echo train >> ran.log; mkdir -p model; echo w > model/w.txt'
    outputs: [model]
    publish: published/
  evaluate:
    kind: evaluate
    needs: [train]
    command: python evaluate.py
    inputs: [model]
    metrics: metrics.json
""")
    project.write("evaluate.py", "open('ran.log', 'a').write('evaluate\\n')\n"
                  "open('metrics.json', 'w').write('{\"loss\": 1}')\n")
    assert set(project.run().values()) == {"succeeded"}
    assert set(project.run().values()) == {"cached"}
    (tmp_path / "metrics.json").unlink()
    assert project.run() == {"train": "cached", "train.publish": "cached", "evaluate": "succeeded"}
    (tmp_path / "published" / "w.txt").unlink()
    assert project.run() == {"train": "cached", "train.publish": "succeeded", "evaluate": "cached"}
    assert (tmp_path / "published" / "w.txt").read_text() == "w\n"
    assert project.log() == ["train", "evaluate", "evaluate"]


def test_an_edit_under_a_symlinked_directory_inside_an_input_reruns_its_node(tmp_path: Path) -> None:
    project = Project(tmp_path / "project", """\
name: linked
steps:
  read:
    command: sh -c 'echo read >> ran.log'
    inputs: [data]
""")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "rows.csv").write_text("1\n")
    (tmp_path / "project" / "data").mkdir()
    (tmp_path / "project" / "data" / "shared").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "project" / "data" / "loop").symlink_to(tmp_path / "project" / "data")  # walked once
    assert project.run() == {"read": "succeeded"}
    assert project.run() == {"read": "cached"}
    (tmp_path / "elsewhere" / "rows.csv").write_text("1\n2\n")
    assert project.run() == {"read": "succeeded"}


def test_new_rows_in_a_local_transfer_source_reach_the_next_run(tmp_path: Path) -> None:
    project = Project(tmp_path, """\
name: staged
steps:
  stage:
    kind: transfer
    from: raw/us/
    to: data/us/
  train:
    needs: [stage]
    command: sh -c 'cat data/us/data.csv > model.txt'
    inputs: [data/us/data.csv]
    outputs: [model.txt]
""")
    project.write("raw/us/data.csv", "a,1\n")
    assert set(project.run().values()) == {"succeeded"}
    assert set(project.run().values()) == {"cached"}
    with open(tmp_path / "raw" / "us" / "data.csv", "a") as handle:
        handle.write("b,2\n")
    assert project.run() == {"stage": "succeeded", "train": "succeeded"}
    assert (tmp_path / "model.txt").read_text() == "a,1\nb,2\n"


@pytest.mark.slow
def test_a_changed_s3_source_object_reaches_the_next_run(aws: str, tmp_path: Path, monkeypatch) -> None:
    import boto3

    monkeypatch.setenv("AWS_ENDPOINT_URL", aws)
    client = boto3.client("s3", endpoint_url=aws, region_name="us-east-1")
    client.create_bucket(Bucket="raw")
    client.put_object(Bucket="raw", Key="us/data.csv", Body=b"a,1\n")
    project = Project(tmp_path, """\
name: staged-s3
steps:
  stage:
    kind: transfer
    from: s3://raw/us/
    to: data/us/
""")
    assert project.run() == {"stage": "succeeded"}
    assert project.run() == {"stage": "cached"}
    client.put_object(Bucket="raw", Key="us/data.csv", Body=b"a,1\nb,2\n")
    assert project.run() == {"stage": "succeeded"}
    assert (tmp_path / "data" / "us" / "data.csv").read_text() == "a,1\nb,2\n"
    assert project.run() == {"stage": "cached"}
    assert os.path.isfile(tmp_path / "data" / "us" / "data.csv")
