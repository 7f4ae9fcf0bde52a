"""`dagflow validate` on what a pipeline's files say: a step that reads what another step writes without
needing it is refused with the `needs:` that fixes it; a script the command runs that is not beside the
pipeline is a located warning with the nearest name (unless a step writes it)."""

from __future__ import annotations

from pathlib import Path

from test_local_support import dagflow_cli

RACING = """\
name: racing
matrix:
  region: [us, br]
steps:
  train:
    command: sh -c 'echo m > models/{region}.txt'
    outputs:
      - models/{region}.txt
  evaluate:
NEEDS    command: sh -c 'cat models/{region}.txt'
    inputs:
      - models/{region}.txt
  report:
    needs: [evaluate]
    over: [region]
    command: ls models
    inputs: [models]
"""


def test_reading_what_a_step_writes_without_needing_it_is_refused_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(RACING.replace("NEEDS", ""))
    done = dagflow_cli("validate", "p.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "p.yaml:12:9: steps.evaluate.inputs[0]: node evaluate." in done.stderr, done.stderr
    assert "add 'train' to the `needs:` of step 'evaluate'" in done.stderr
    assert "p.yaml:17:14: steps.report.inputs[0]: node report reads 'models'" in done.stderr  # a directory
    (tmp_path / "p.yaml").write_text(RACING.replace("NEEDS", "    needs: [train]\n"))
    fixed = dagflow_cli("validate", "p.yaml", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr  # report needs train through evaluate


SCRIPTS = """\
name: typo
steps:
  make:
    command: [sh, -c, "python make.py > gen.py"]
    outputs: [gen.py]
  train:
    needs: [make]
    command: python trian.py --config conf.yaml
  generated:
    needs: [make]
    command: [python, gen.py]
  tool:
    command: ./tools/run.sh
"""


def test_a_script_the_command_runs_that_is_not_there_is_a_located_warning_with_the_nearest_name(
    tmp_path: Path,
) -> None:
    (tmp_path / "p.yaml").write_text(SCRIPTS)
    for name in ("train.py", "make.py", "tools/run.sh"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    for engine in ([], ["--engine", "condor"]):
        done = dagflow_cli("validate", "p.yaml", *engine, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        warnings = [line for line in done.stderr.splitlines() if "the command runs" in line]
        assert warnings == [
            f"warning: p.yaml:8:14: steps.train.command: the command runs 'trian.py', which is not in {tmp_path} "
            "and no step writes it; did you mean 'train.py'?"
        ], done.stderr  # gen.py is made by a step; the others are there
