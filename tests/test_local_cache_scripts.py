"""The files a node's command runs are part of what it computes: editing `evaluate.py` (or a config file
named as `--config=FILE`) reruns that node and what depends on it, on a plain re-run and on `--resume`,
although neither file is listed in `inputs`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_local_support import dagflow_cli

PIPELINE = """\
name: scripted
steps:
  evaluate:
    command: [python, evaluate.py, --config=conf.txt]
    outputs: [score.txt]
  report:
    needs: [evaluate]
    command: [sh, -c, 'cat score.txt >> reports.txt; exit "$(cat report-rc 2>/dev/null || echo 0)"']
"""
EVALUATE = "conf = open('conf.txt').read().strip()\nopen('score.txt', 'w').write('VERSION ' + conf + '\\n')\n"


def setup(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    (tmp_path / "evaluate.py").write_text(EVALUATE.replace("VERSION", "v1"))
    (tmp_path / "conf.txt").write_text("a\n")


def run(tmp_path: Path, *args: str) -> dict[str, str]:
    done = dagflow_cli("run", *args, cwd=tmp_path)
    status = json.loads(dagflow_cli("status", "--json", cwd=tmp_path).stdout)
    assert "Traceback" not in done.stderr, done.stderr
    return {node["node"]: node["state"] for node in status["nodes"]}


def reports(tmp_path: Path) -> list[str]:
    return (tmp_path / "reports.txt").read_text().splitlines()


@pytest.mark.slow
def test_editing_a_script_or_a_config_file_the_command_names_reruns_it_and_its_dependents(tmp_path: Path) -> None:
    setup(tmp_path)
    assert run(tmp_path, "pipeline.yaml") == {"evaluate": "succeeded", "report": "succeeded"}
    assert run(tmp_path, "pipeline.yaml") == {"evaluate": "cached", "report": "cached"}

    (tmp_path / "evaluate.py").write_text(EVALUATE.replace("VERSION", "v2"))
    assert run(tmp_path, "pipeline.yaml") == {"evaluate": "succeeded", "report": "succeeded"}
    assert reports(tmp_path) == ["v1 a", "v2 a"]

    (tmp_path / "conf.txt").write_text("b\n")
    assert run(tmp_path, "pipeline.yaml") == {"evaluate": "succeeded", "report": "succeeded"}
    assert reports(tmp_path) == ["v1 a", "v2 a", "v2 b"]
    assert run(tmp_path, "pipeline.yaml") == {"evaluate": "cached", "report": "cached"}


@pytest.mark.slow
def test_resume_does_not_keep_a_finished_node_whose_script_was_edited_since(tmp_path: Path) -> None:
    setup(tmp_path)
    (tmp_path / "report-rc").write_text("3\n")
    assert run(tmp_path, "pipeline.yaml") == {"evaluate": "succeeded", "report": "failed"}

    (tmp_path / "evaluate.py").write_text(EVALUATE.replace("VERSION", "v2"))  # the fix is in the script
    (tmp_path / "report-rc").unlink()
    resumed = dagflow_cli("run", "--resume", "latest", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "changed since they ran" in resumed.stderr and "evaluate" in resumed.stderr
    assert (tmp_path / "score.txt").read_text() == "v2 a\n"
    assert reports(tmp_path) == ["v1 a", "v2 a"]


def test_validate_explain_says_per_step_what_its_cache_key_tracks_and_what_none_sees(tmp_path: Path) -> None:
    """#40 item 9: what can be tracked is (a shell's words, `python -m`, imported modules of the pipeline's own),
    and validate says so per step, with one line of what no cache key sees."""
    (tmp_path / "a.py").write_text("import helper\n")
    (tmp_path / "helper.py").write_text("")
    (tmp_path / "mod.py").write_text("")
    (tmp_path / "pipeline.yaml").write_text(
        "name: p\n"
        "steps:\n"
        '  shell: {command: [sh, -c, "python a.py > out.txt"], outputs: [out.txt]}\n'
        "  module: {command: python -m mod, needs: [shell], inputs: [out.txt]}\n"
    )
    done = dagflow_cli("validate", "pipeline.yaml", "--explain", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == (
        "step shell (shell): command, env, params and upstream; inputs: -; files its command runs: a.py, helper.py"
    ), done.stdout
    assert lines[2] == (
        "step module (module): command, env, params and upstream; inputs: out.txt; files its command runs: mod.py"
    ), done.stdout
    assert lines[3].startswith("not tracked by any cache key: the environment dagflow runs in"), done.stdout
    plain = dagflow_cli("validate", "pipeline.yaml", cwd=tmp_path)
    assert plain.stdout.splitlines() == lines[:1]  # without --explain: the one line, as before


def test_scripts_read_on_many_threads_at_once_are_parsed_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search's trial runners key their nodes' caches on threads of one process, each reading its command's
    Python files: CPython 3.11's ast.parse is not safe on two threads at once (its AST constructor's recursion
    depth is shared: "SystemError: AST constructor recursion depth mismatch", seen failing a trial in CI), so
    the parses take turns. A parse that lingers lets any other thread in, where nothing makes them take turns."""
    import ast
    import threading
    import time

    from dagflow.plan import script_files

    inside, overlaps = [0], []
    parse = ast.parse

    def lingering_parse(*args: object, **kwargs: object) -> ast.AST:
        inside[0] += 1
        if inside[0] > 1:
            overlaps.append(inside[0])
        time.sleep(0.02)  # a GIL switch inside the parse, made certain
        try:
            return parse(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            inside[0] -= 1

    monkeypatch.setattr(script_files.ast, "parse", lingering_parse)
    for number in range(8):
        (tmp_path / f"job{number}.py").write_text(f"import json\nimport helper{number}\n")
        (tmp_path / f"helper{number}.py").write_text("import os\n")
    found: dict[int, list[str]] = {}

    def read(number: int) -> None:
        found[number] = script_files.ScriptFiles(tmp_path)(["python", f"job{number}.py"])

    threads = [threading.Thread(target=read, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == {number: [f"job{number}.py", f"helper{number}.py"] for number in range(8)}
    assert overlaps == []
