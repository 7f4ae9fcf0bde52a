"""`dagflow run --jobs N` under a low open-files limit: the soft limit is raised to the hard one, and no more
nodes run at once than the descriptors allow, so none fails with "Too many open files"."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from test_local_support import cli_env

NODES = 40


def write_pipeline(tmp_path: Path, script: str) -> None:
    values = ", ".join(str(index) for index in range(NODES))
    (tmp_path / "p.yaml").write_text(textwrap.dedent(f"""\
        name: fds
        matrix: {{i: [{values}]}}
        steps:
          work:
            command: [sh, -c, '{script}']
        """))


def limited(soft: int, hard: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def run(tmp_path: Path, soft: int, hard: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", "run", "p.yaml", "--run-id", "r", "--jobs", "600", "--json"],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=600, preexec_fn=limited(soft, hard),
    )


def node_states(tmp_path: Path) -> dict[str, str]:
    status = subprocess.run([sys.executable, "-m", "dagflow", "status", "r", "--json"], cwd=tmp_path, env=cli_env(),
                            capture_output=True, text=True, timeout=120)
    return {node["node"]: node["state"] for node in json.loads(status.stdout)["nodes"]}


@pytest.mark.slow
def test_many_nodes_at_once_under_a_low_hard_limit_all_succeed(tmp_path: Path) -> None:
    # each node writes to both streams, so the keeper holds its two pipes and two log files
    write_pipeline(tmp_path, "echo out {i}; echo err {i} >&2; sleep 2")
    result = run(tmp_path, 64, 64)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Too many open files" not in result.stdout + result.stderr
    assert set(node_states(tmp_path).values()) == {"succeeded"}
    logs = tmp_path / ".dagflow" / "runs" / "r" / "logs"
    missing = [i for i in range(NODES) if not all((logs / f"work.{i}{end}").is_file() for end in (".out", ".err"))]
    assert not missing, f"logs lost (the keeper could not open them) of nodes {missing}"
    assert all((logs / f"work.{i}.err").read_text() == f"err {i}\n" for i in range(NODES))
    notice = [line for line in result.stderr.splitlines() if "open files" in line]
    assert len(notice) == 1 and "--jobs 600" in notice[0] and "the limit is 64" in notice[0], result.stderr


def test_the_soft_limit_is_raised_to_the_hard_limit(tmp_path: Path) -> None:
    write_pipeline(tmp_path, "ulimit -n")
    result = run(tmp_path, 64, 4096)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / ".dagflow" / "runs" / "r" / "logs" / "work.0.out").read_text() == "4096\n"
    assert "open files" not in result.stderr  # 4096 descriptors are enough for 40 nodes at once
