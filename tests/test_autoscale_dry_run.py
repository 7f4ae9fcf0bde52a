"""`dagflow autoscale --once --dry-run` on a machine with no AWS credentials at all (#28 item 8e).

The dry run is how a site checks its policy against its pool's demand before the autoscaler gets an
IAM role: the demand (job ads) and the pool (startd ads) come from files here, as `condor_q -l` and
`condor_status -l` print them, and there are no AWS_* variables and no ~/.aws. It must print what it
would do and exit 0, saying that it took every group as empty since it could not read AWS.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

POLICY = """
settings: {idle_grace_s: 60, max_scale_in_fraction: 0.5}
groups:
  - {name: cpu, asg: cpu-asg, region: us-east-1, instance_type: c6i.4xlarge, min: 0, max: 40,
     machine: {Cpus: 16, Memory: 31000, Disk: 1000000, GPUs: 0}}
"""


def job_ad(proc: int) -> str:
    return "\n".join([
        "ClusterId = 7",
        f"ProcId = {proc}",
        "JobStatus = 1",
        "RequestCpus = 8",
        "RequestMemory = 4096",
        "RequestDisk = 1024",
        'Owner = "alice"',
        "Requirements = (TARGET.Cpus >= RequestCpus) && (TARGET.Memory >= RequestMemory)",
    ])


def no_aws_env(home: Path) -> dict[str, str]:
    """This process's environment without a single AWS_* variable, and a HOME with no .aws in it."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    env["HOME"] = str(home)
    return env


def dry_run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "policy.yaml").write_text(POLICY)
    (tmp_path / "jobs.ads").write_text("\n\n".join(job_ad(proc) for proc in range(5)) + "\n")
    (tmp_path / "nodes.ads").write_text("")
    home = tmp_path / "home"
    home.mkdir()
    command = [
        sys.executable, "-m", "dagflow", "autoscale", "--once", *extra,
        "--policy", str(tmp_path / "policy.yaml"),
        "--jobs-file", str(tmp_path / "jobs.ads"),
        "--nodes-file", str(tmp_path / "nodes.ads"),
        "--state-file", str(tmp_path / "state.json"),
    ]
    return subprocess.run(
        command, capture_output=True, text=True, env=no_aws_env(home), cwd=tmp_path, timeout=120, check=False
    )


def test_a_dry_run_needs_no_aws_credentials(tmp_path: Path) -> None:
    done = dry_run(tmp_path, "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "(dry run: nothing done; AWS not read, no credentials: every group taken as empty)" in done.stdout
    # 5 jobs of 8 CPUs on 16-CPU instances: 3 instances, from an empty group.
    assert "[dry-run] would set cpu-asg (us-east-1) desired capacity 0 -> 3" in done.stdout
    assert "capacity unknown" in done.stdout
    assert not (tmp_path / "state.json").exists()


def test_a_real_run_without_credentials_says_so(tmp_path: Path) -> None:
    done = dry_run(tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "no AWS credentials" in done.stderr
