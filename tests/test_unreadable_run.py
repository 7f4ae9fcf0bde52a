"""An earlier run directory the user may not read (#40 item 17): one `sudo dagflow run` under umask 077 leaves
a root-owned 0700 run beside the user's. The user's next `dagflow run` carries on, with one warning line naming
the run it could not check for live nodes; `dagflow status RUN` of that run is one line and exit 2; plain
`dagflow status` shows the user's latest run. Never a PermissionError traceback.

As root every directory is readable, so the user's commands run as `nobody` (setpriv); skipped where the test
does not run as root, or where that user cannot reach this interpreter."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_local_support import cli_env

USER = "nobody"
PIPELINE = """\
name: nightly
steps:
  a: {command: [sh, -c, "echo a >> ran.log"]}
"""


def as_user(argv: list[str], workdir: Path) -> list[str]:
    user = pwd.getpwnam(USER)
    ids = [f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    return ["setpriv", *ids, "env", f"HOME={workdir}", *argv]


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A pipeline directory the user owns (pytest's tmp_path is root's, 0700: the user could not enter it)."""
    if os.geteuid() != 0:
        pytest.skip("running dagflow as another user needs root")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    path = Path(tempfile.mkdtemp(prefix="dagflow-unreadable-"))
    try:
        os.chmod(path, 0o755)
        shutil.chown(path, USER)
        reach = subprocess.run(as_user([sys.executable, "-c", "import dagflow"], path), cwd=path, env=cli_env(),
                               capture_output=True, text=True, check=False)  # fmt: skip
        if reach.returncode != 0:
            pytest.skip(f"user {USER} cannot run {sys.executable} with dagflow importable: {reach.stderr.strip()}")
        (path / "pipeline.yaml").write_text(PIPELINE)
        shutil.chown(path / "pipeline.yaml", USER)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def dagflow(workdir: Path, *args: str, user: bool = True) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "dagflow", *args]
    return subprocess.run(
        as_user(argv, workdir) if user else argv, cwd=workdir, env=cli_env(), capture_output=True, text=True,
        timeout=120, check=False, umask=0o022 if user else 0o077,
    )


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_an_earlier_run_the_user_may_not_read_is_one_line_never_a_traceback(workdir: Path) -> None:
    first = dagflow(workdir, "run", "pipeline.yaml")
    assert first.returncode == 0, first.stderr
    by_root = dagflow(workdir, "run", "pipeline.yaml", "--force", "a", user=False)  # `sudo dagflow run`, umask 077
    assert by_root.returncode == 0, by_root.stderr
    runs = workdir / ".dagflow" / "runs"
    (root_run,) = [p for p in runs.iterdir() if p.is_dir() and p.stat().st_uid == 0]
    assert root_run.stat().st_mode & 0o777 == 0o700

    again = dagflow(workdir, "run", "pipeline.yaml", "--force", "a")
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    (warning,) = lines(again.stderr)
    assert root_run.name in warning and "may not read" in warning, warning
    assert (workdir / "ran.log").read_text().split() == ["a", "a", "a"]

    for args in (["status", root_run.name], ["report", root_run.name], ["run", "--resume", root_run.name]):
        refused = dagflow(workdir, *args)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        (line,) = lines(refused.stderr)
        assert f"{root_run}: permission denied" in line and "belongs to root" in line, line

    latest = dagflow(workdir, "status", "--json")
    assert latest.returncode == 0, latest.stderr
    assert json.loads(latest.stdout)["state"] == "succeeded"
    assert json.loads(latest.stdout)["run_id"] not in (root_run.name, "")
