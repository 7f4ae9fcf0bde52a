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



def test_a_long_chain_declared_last_step_first_is_checked_without_recursion(tmp_path: Path) -> None:
    """Each step reads what the one declared after it writes, 1,500 deep: the walk of what a step needs went
    one Python frame per step (a RecursionError traceback); a step that reads a file of the step before the
    one it needs is still refused."""
    lines = ["name: chain", "steps:"]
    for index in range(1500):
        lines += [f"  s{index}:", '    command: "true"', f"    outputs: [d/{index}]"]
        if index < 1499:
            lines += [f"    needs: [s{index + 1}]", f"    inputs: [d/{index + 1}]"]
    (tmp_path / "p.yaml").write_text("\n".join(lines) + "\n")
    done = dagflow_cli("validate", "p.yaml", cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    (tmp_path / "p.yaml").write_text("\n".join(lines).replace("inputs: [d/2]", "inputs: [d/2, d/0]") + "\n")
    racing = dagflow_cli("validate", "p.yaml", cwd=tmp_path)
    assert racing.returncode == 2 and "add 's0' to the `needs:` of step 's1'" in racing.stderr, racing.stderr[-2000:]

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
