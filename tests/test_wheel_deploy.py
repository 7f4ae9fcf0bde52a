"""The wheel carries the EC2 boot path (deploy/), and an installed dagflow says where it is (#28 item 8f).

deploy/ec2-user-data.sh installs the systemd unit beside it; on an instance dagflow comes from
`pip install dagflow`, so both files must be in the wheel and `dagflow agent deploy-dir` must find them
there, not in a source checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # its module fixture alone takes seconds: not for the fast subset

ROOT = Path(__file__).resolve().parent.parent
DEPLOY_FILES = sorted(path.name for path in (ROOT / "deploy").iterdir() if path.is_file())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dagflow's wheel, built from this checkout the way a release is (hatchling, no isolation)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    (built,) = out.glob("dagflow-*.whl")
    return built


def test_the_wheel_carries_deploy(wheel: Path) -> None:
    assert DEPLOY_FILES == ["dagflow-agent.service", "ec2-user-data.sh"]
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [name for name in DEPLOY_FILES if f"dagflow/_data/deploy/{name}" not in names]
    assert not missing, f"not in {wheel.name}: {missing}"


@pytest.mark.slow
def test_installed_dagflow_prints_its_deploy_folder(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-m", "dagflow", "agent", "deploy-dir"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    folder = Path(done.stdout.strip())
    assert folder == site / "dagflow" / "_data" / "deploy"
    assert sorted(path.name for path in folder.iterdir()) == DEPLOY_FILES
    user_data = (folder / "ec2-user-data.sh").read_text()
    assert "dagflow agent deploy-dir" in user_data  # how the boot script finds the unit beside it
