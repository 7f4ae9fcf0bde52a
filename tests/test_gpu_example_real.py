"""examples/gpu-train on a real NVIDIA GPU (issue #28 item 7): skipped where nvidia-smi finds none or torch
is missing (CI has neither).

Locally, `dagflow run` trains each region on the GPU, sizes the batch from the card's memory and records
what NVML measured (GPU memory peak, utilisation) in the run's usage, which `dagflow report` shows. On the
test pool started with HTCondor's own GPU discovery (`DAGFLOW_CONDOR_GPUS=real scripts/condor-pool.sh up`,
no simulated devices), `dagflow submit` in the transfer mode gets the card assigned by the startd,
`{gpu.memory_mb}` from the assigned GPU's ad, the checkpoints carried across its restarts, and a report.

Each test prints one `GPU-EVIDENCE {...}` line: what ran where and what was measured.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dagflow.run.usage import read_usage
from tests.condor_pool import Pool

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gpu-train"
EPOCHS = 3


def _driver_gpus() -> list[tuple[str, int]]:
    """(name, usable memory in MiB: total less reserved) of each GPU the driver lists."""
    if shutil.which("nvidia-smi") is None:
        return []
    query = ["nvidia-smi", "--query-gpu=name,memory.total,memory.reserved", "--format=csv,noheader,nounits"]
    listing = subprocess.run(query, capture_output=True, text=True, timeout=60, check=False)
    if listing.returncode != 0:
        return []
    rows = [line.rsplit(",", 2) for line in listing.stdout.splitlines()]
    return [(name.strip(), int(total) - int(reserved)) for name, total, reserved in rows]


DRIVER_GPUS = _driver_gpus()
pytestmark = [
    pytest.mark.skipif(not DRIVER_GPUS, reason="no NVIDIA GPU on this machine (nvidia-smi lists none)"),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (pip install -e '.[gpu]')"),
]


def _example(into: Path) -> Path:
    ignore = shutil.ignore_patterns("checkpoints", "models", "data", ".dagflow")
    shutil.copytree(EXAMPLE, into, ignore=ignore, dirs_exist_ok=True)
    pipeline = into / "pipeline.yaml"
    pipeline.write_text(pipeline.read_text().replace("epochs: 6", f"epochs: {EPOCHS}"))
    return into


def _batch_size(gpu_memory_mb: int) -> int:  # examples/gpu-train/train.py's rule
    return max(256, min(16384, gpu_memory_mb // 8))


def _train_usage(run_dir: Path) -> list[dict[str, object]]:
    return [
        {"node": r.node, "attempt": r.attempt, "gpu_memory_peak_mb": r.gpu_memory_peak_mb,
         "gpu_utilization_pct": r.gpu_utilization_pct, "wall_s": r.wall_s, "reason": r.reason}
        for r in read_usage(run_dir) if r.step == "train"
    ]  # fmt: skip


def test_the_gpu_example_trains_locally_and_nvml_measures_it(tmp_path: Path) -> None:
    workdir = _example(tmp_path / "gpu-train")
    done = subprocess.run(
        [sys.executable, "-m", "dagflow", "run", "pipeline.yaml", "--runs-dir", "runs"],
        cwd=workdir, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = [path for path in (workdir / "runs").iterdir() if path.is_dir()]
    name, memory_mb = DRIVER_GPUS[0]
    metrics = {
        region: json.loads((workdir / "models" / region / "metrics.json").read_text()) for region in ("us", "br")
    }
    for found in metrics.values():
        assert found["device"] == "cuda" and found["gpu"] == name and found["epochs"] == EPOCHS
        assert found["batch_size"] == _batch_size(memory_mb)  # {gpu.memory_mb}: this card's usable memory
    usage = _train_usage(run_dir)
    assert len(usage) == 2 * EPOCHS  # one attempt per epoch (exit 85, run again), per region
    assert all(u["gpu_memory_peak_mb"] is not None and u["gpu_memory_peak_mb"] > 0 for u in usage), usage
    assert any(u["gpu_utilization_pct"] is not None for u in usage), usage
    report = subprocess.run(
        [sys.executable, "-m", "dagflow", "report", str(run_dir) + "/", "--out", str(tmp_path / "report.html")],
        cwd=workdir, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert report.returncode == 0, report.stdout + report.stderr
    row = _report_row(tmp_path / "report.html", "train")
    print(
        "GPU-EVIDENCE",
        json.dumps(
            {
                "where": "local",
                "gpu": name,
                "metrics": metrics,
                "train_usage": usage,
                "report_train_row": row,
                "run_output_tail": done.stdout[-1500:],
            }
        ),
    )


def _report_row(page: Path, step: str) -> str:
    """The text of the report's resources row for step (tags dropped)."""
    html = page.read_text()
    rows = re.findall(r"<tr>(.*?)</tr>", html, re.DOTALL)
    for row in rows:
        cells = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
        if cells and cells[0] == step:
            return " | ".join(cells)
    return ""


@pytest.mark.condor_pool
def test_the_gpu_example_runs_on_the_pool_with_htcondors_own_gpu_discovery(condor_pool: Pool) -> None:
    if os.environ.get("DAGFLOW_CONDOR_GPUS") != "real":
        pytest.skip("the test pool simulates its GPUs; start it with DAGFLOW_CONDOR_GPUS=real on a GPU machine")
    ads = condor_pool.run(["condor_status", "-long"]).stdout
    discovered = {}  # GPU id (as AssignedGPUs names it) -> device name, from the startd's nested GPU ads
    discovered_memory = {}  # and its GlobalMemoryMb (CUDA's figure: a little under nvidia-smi's total)
    for ad in re.findall(r"^GPUs_GPU_\w+ = \[(.*)\]$", ads, re.MULTILINE):
        fields = dict(re.findall(r'(\w+) = "([^"]*)"', ad))
        discovered[fields["Id"]] = fields["DeviceName"]
        discovered_memory[fields["Id"]] = int(re.search(r"GlobalMemoryMb = (\d+)", ad).group(1))  # type: ignore[union-attr]
    name = DRIVER_GPUS[0][0]
    assert name in discovered.values(), f"HTCondor's discovery found {discovered}, the driver {DRIVER_GPUS}"
    workdir = _example(condor_pool.workdir("gpu-example"))
    condor_pool.give(workdir)
    submitted = condor_pool.dagflow(["submit", "pipeline.yaml", "--json"], cwd=workdir)  # transfer mode
    run_id = json.loads(submitted.stdout)["run_id"]
    status = condor_pool.ended(workdir, run_id)
    assert status["state"] == "succeeded", status
    history = condor_pool.run(["condor_history", "-constraint", f'DagflowRunId == "{run_id}" && DagflowStep == "train"',
                               "-af", "AssignedGPUs", "GPUsMemoryUsage", "GPUsUsage"]).stdout  # fmt: skip
    assigned = {line.split()[0] for line in history.splitlines() if line.strip()}
    assert assigned and assigned <= set(discovered), history
    metrics = {
        region: json.loads((workdir / "models" / region / "metrics.json").read_text()) for region in ("us", "br")
    }
    for found in metrics.values():
        assert found["device"] == "cuda" and found["gpu"] == name and found["epochs"] == EPOCHS
        # {gpu.memory_mb}: the assigned GPU's GlobalMemoryMb, as the startd advertises it
        assert found["batch_size"] == _batch_size(discovered_memory[next(iter(assigned))])
    report = condor_pool.dagflow(["report", run_id, "--out", str(workdir / "report.html")], cwd=workdir)
    run_dir = workdir / ".dagflow" / "runs" / run_id
    print(
        "GPU-EVIDENCE",
        json.dumps(
            {
                "where": "condor",
                "gpus_discovered": discovered,
                "metrics": metrics,
                "history_train": history.splitlines(),
                "train_usage": _train_usage(run_dir),
                "report_train_row": _report_row(workdir / "report.html", "train"),
                "report_output": report.stdout[-800:],
            }
        ),
    )
