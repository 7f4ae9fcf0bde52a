"""A real one-machine HTCondor pool for the condor tests (scripts/condor-pool.sh).

CI (`.ci/run`) starts the pool before the tests and stops it after; `up` is idempotent, so the fixture's
`up` finds it running and leaves it alone. Run without CI, the fixture starts the pool itself and stops
it at the end of the session. Where the release cannot run (no ../shared/htcondor tarball, not root and
no pool of our own), the pool tests are skipped with the reason.

HTCondor refuses jobs owned by root, so everything that talks to the schedd runs as the pool's user:
`pool.run([...])` and `pool.dagflow([...])` go through runuser, in a directory that user owns
(`pool.workdir(name)`). Tests marked `condor_pool` need the pool; `-m "not condor_pool"` is the fast subset.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster_lifetime import bring_up, cluster_lock, cluster_use

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "condor-pool.sh"


def state_dir() -> Path:
    return Path(os.environ.get("DAGFLOW_CONDOR_DIR", "/var/tmp/dagflow-condor"))


def release_bin() -> Path | None:
    """The unpacked release's bin/ (condor_dag_checker, condor_q ...), or None where it is not unpacked."""
    found = state_dir() / "release" / "htcondor" / "bin"
    return found if (found / "condor_q").exists() else None


def unpacked_release_bin() -> Path | None:
    """The release's bin/, unpacked now if ../shared/htcondor has the tarball: tests that need only its tools
    (condor_dag_checker) run whether or not a pool test ran first. None where there is no release."""
    found = release_bin()
    tarball = _tarball()
    if found is not None or tarball is None or not tarball.exists():
        return found
    with cluster_lock("condor"):
        if release_bin() is None:
            subprocess.run([str(SCRIPT), "unpack"], check=True, capture_output=True, text=True)
    return release_bin()


def dag_checker() -> Path | None:
    """condor_dag_checker: on PATH, or in the release (unpacked for it where there is one)."""
    on_path = shutil.which("condor_dag_checker")
    if on_path:
        return Path(on_path)
    release = unpacked_release_bin()
    return release / "condor_dag_checker" if release is not None and (release / "condor_dag_checker").exists() else None


def _tarball() -> Path | None:
    given = os.environ.get("DAGFLOW_CONDOR_TARBALL")
    if given:
        return Path(given)
    found = sorted((ROOT.parent / "shared" / "htcondor").glob("htcondor-*-debian12-x86_64.tar.xz"))
    return found[-1] if found else None


@dataclass(frozen=True)
class Pool:
    config: Path
    bin: Path
    user: str
    work: Path

    @property
    def env(self) -> dict[str, str]:
        """The client environment: this pool's configuration, its tools first on PATH."""
        path = f"{self.bin}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
        return {"CONDOR_CONFIG": str(self.config), "PATH": path, "HOME": str(self.work), "LANG": "C.UTF-8"}

    def _as_user(self, argv: list[str], extra_env: dict[str, str] | None) -> list[str]:
        env = {**self.env, **(extra_env or {})}
        prefix = ["env", *(f"{key}={value}" for key, value in env.items())]
        if os.geteuid() == 0 and self.user != "root":
            return ["runuser", "-u", self.user, "--", *prefix, *argv]
        return [*prefix, *argv]

    def run(
        self,
        argv: list[str],
        cwd: Path | None = None,
        check: bool = True,
        env: dict[str, str] | None = None,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        """argv as the pool user, with the pool's client environment."""
        done = subprocess.run(
            self._as_user(argv, env), cwd=cwd or self.work, capture_output=True, text=True, timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def dagflow(self, args: list[str], cwd: Path | None = None, check: bool = True, **kw: object):
        """`dagflow ARGS` (this checkout's, in this interpreter) as the pool user."""
        return self.run([sys.executable, "-m", "dagflow", *args], cwd=cwd, check=check, **kw)  # type: ignore[arg-type]

    def workdir(self, name: str) -> Path:
        """A fresh directory the pool user owns (its DAGs, logs and outputs are written as that user)."""
        path = self.work / f"{name}-{os.getpid()}-{time.monotonic_ns()}"
        path.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(path, self.user)
        return path

    def give(self, path: Path) -> None:
        """Hand a tree the test wrote as root over to the pool user."""
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", self.user, str(path)], check=True)

    def status(self, workdir: Path, run_id: str) -> dict:
        """`dagflow status RUN --json`, parsed."""
        done = self.dagflow(["status", run_id, "--json"], cwd=workdir, check=False)
        return json.loads(done.stdout)

    def ended(self, workdir: Path, run_id: str) -> dict:
        """The run's status once it is neither running nor waiting to start."""
        return self.wait_until(  # type: ignore[return-value]
            lambda: (s := self.status(workdir, run_id))["state"] not in ("running", "not-started") and s,
            f"run {run_id} to end",
        )

    def wait_until(self, predicate: Callable[[], object], what: str, timeout: float = 600) -> object:
        """Poll predicate until it is true; generous by default: the pool's cycles are seconds long and a
        loaded 2-core machine is slow, so the limit only stops a test that would otherwise hang."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(1)


@pytest.fixture(scope="session")
def condor_pool() -> Iterator[Pool]:
    tarball = _tarball()
    if release_bin() is None and (tarball is None or not tarball.exists()):
        pytest.skip("no HTCondor release: ../shared/htcondor/htcondor-*-debian12-x86_64.tar.xz is missing")
    env = {**os.environ, "DAGFLOW_CONDOR_PYTHON": sys.executable}
    def up() -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SCRIPT), "up"], capture_output=True, text=True, env=env, check=False)

    def running() -> bool:
        return subprocess.run([str(SCRIPT), "status"], capture_output=True, env=env, check=False).returncode == 0

    done = bring_up("condor", SCRIPT, is_up=running, up=up)
    if done is None:
        # `up` also when the pool runs (CI starts it before this interpreter's venv exists): it lets the pool
        # user reach this interpreter.
        with cluster_lock("condor"):
            done = up()
    if done.returncode != 0:
        pytest.fail(f"could not start the test HTCondor pool:\n{done.stdout}{done.stderr}")
    user = subprocess.run([str(SCRIPT), "user"], capture_output=True, text=True, check=True).stdout.strip()
    state = state_dir()
    bin_dir = release_bin()
    assert bin_dir is not None
    yield Pool(config=state / "condor_config", bin=bin_dir, user=user, work=state / "work")


@pytest.fixture(autouse=True)
def _condor_pool_use(request: pytest.FixtureRequest) -> Iterator[None]:
    """Pool tests share the pool; one marked `condor_pool_exclusive` (it drains the only machine) runs alone,
    so the other pytest-xdist workers' jobs are not evicted under them."""
    if "condor_pool" not in request.fixturenames:
        yield
        return
    with cluster_use("condor", exclusive=request.node.get_closest_marker("condor_pool_exclusive") is not None):
        yield
