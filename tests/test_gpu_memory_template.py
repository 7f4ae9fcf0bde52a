"""{gpu.memory_mb}: the memory of the GPU a node actually got, for sizing batches to the card.

Locally from detection (a stand-in nvidia-smi on PATH reports a 16 GB and a 40 GB card); on HTCondor a
`$$([...])` match-time reference to the matched slot's assigned GPU, checked on the test pool's
simulated V100 and A100.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from local_run import run_local
from test_local_support import dagflow_cli

from dagflow.engines.condor.gpu_memory import fill_match_time, gpu_memory_expression
from dagflow.engines.local import RunOptions
from dagflow.engines.registry import spec_checks
from dagflow.gpu_memory import GPU_MEMORY_MARK
from dagflow.plan.expand import expand
from dagflow.spec import load_spec
from tests.condor_pool import Pool

# Writes "<CUDA_VISIBLE_DEVICES> <argv value> <env value> <_CONDOR_AssignedGPUs>" to out/<card>.txt, then
# waits (up to 60 s) for the other card's file: the two nodes hold their GPUs at once, so get different ones.
PROBE = """\
import os, sys, time
out, card, value = sys.argv[1], sys.argv[2], sys.argv[3]
other = "two" if card == "one" else "one"
devices = os.environ.get("CUDA_VISIBLE_DEVICES")
assigned = os.environ.get("_CONDOR_AssignedGPUs", "")
with open(os.path.join(out, card + ".tmp"), "w") as handle:
    handle.write(f"{devices} {value} {os.environ['BATCH_GPU_MB']} {assigned}\\n")
os.rename(os.path.join(out, card + ".tmp"), os.path.join(out, card + ".txt"))
for _ in range(600):
    if os.path.exists(os.path.join(out, other + ".txt")):
        sys.exit(0)
    time.sleep(0.1)
sys.exit(1)
"""


def _pipeline(workdir: Path, out: Path) -> Path:
    (workdir / "probe.py").write_text(PROBE)
    path = workdir / "pipeline.yaml"
    path.write_text(
        "name: sizes\n"
        "condor: {data_mode: shared}\n"  # the nodes meet in `out`, outside HTCondor's sandboxes
        "matrix:\n  card: [one, two]\n"
        "steps:\n"
        "  train:\n"
        f'    command: [python, probe.py, "{out}", "{{card}}", "{{gpu.memory_mb}}"]\n'
        '    env: {BATCH_GPU_MB: "{gpu.memory_mb}"}\n'
        "    inputs: [probe.py]\n"
        "    resources: {gpus: 1, memory: 64MB}\n"
    )
    return path


def _fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        "  *uuid*) printf '0, GPU-aaaa\\n1, GPU-bbbb\\n' ;;\n"
        "  *) printf '0, V100, 16384, 7.0, 550.1, 0\\n1, A100, 40960, 8.0, 550.1, 0\\n' ;;\n"
        "esac\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")


def _results(out: Path) -> dict[str, list[str]]:
    return {card: (out / f"{card}.txt").read_text().split() for card in ("one", "two")}


def test_validation_allows_it_only_where_a_gpu_node_runs(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        "name: bad\nsteps:\n"
        "  cpu:\n    command: [echo, '{gpu.memory_mb}']\n"
        "  gpu:\n    command: [echo, '{gpu.memory_mb}']\n    outputs: ['m{gpu.memory_mb}.txt']\n"
        "    resources: {gpus: 1}\n"
    )
    done = dagflow_cli("validate", str(path), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert re.search(
        r"pipeline.yaml:4:\d+: steps.cpu.command\[1\]: \{gpu.memory_mb\} is the memory of the GPU", done.stderr
    )
    assert re.search(r"pipeline.yaml:7:\d+: steps.gpu.outputs\[0\]: \{gpu.memory_mb\} is the memory", done.stderr)
    assert "steps.gpu.command" not in done.stderr
    assert "2 errors found" in done.stderr


def test_local_nodes_see_the_memory_of_the_gpu_they_got(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_nvidia_smi(tmp_path, monkeypatch)
    out = tmp_path / "out"
    out.mkdir()
    path = _pipeline(tmp_path, out)
    plan = expand(load_spec(path, spec_checks()))
    assert GPU_MEMORY_MARK in plan.nodes["train.one"].argv[-1]  # filled only when the node starts
    result = run_local(plan, RunOptions(runs_dir=tmp_path / "runs", jobs=2))
    assert result.ok, result.failures
    seen = _results(out)
    by_device = {fields[0]: fields for fields in seen.values()}
    assert set(by_device) == {"0", "1"}  # they ran at once, so on different GPUs
    assert by_device["0"][1:3] == ["16384", "16384"]  # argv and env alike
    assert by_device["1"][1:3] == ["40960", "40960"]


def test_local_gpus_named_with_the_option_get_their_memory_from_detection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_nvidia_smi(tmp_path, monkeypatch)
    out = tmp_path / "out"
    out.mkdir()
    path = _pipeline(tmp_path, out)
    spec = load_spec(path, spec_checks())
    result = run_local(expand(spec), RunOptions(runs_dir=tmp_path / "runs", jobs=2, gpus="1,0"))
    assert result.ok, result.failures
    assert {fields[0]: fields[1] for fields in _results(out).values()} == {"0": "16384", "1": "40960"}


def test_a_gpu_of_unknown_memory_fails_the_node_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    path = _pipeline(tmp_path, out)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvidia-smi: --gpus names devices, not their memory
    spec = load_spec(path, spec_checks())
    result = run_local(expand(spec), RunOptions(runs_dir=tmp_path / "runs", jobs=2, gpus="0,1"))
    assert not result.ok
    assert len(result.failures) == 2
    assert all("the memory of GPU" in failure.why and "is unknown" in failure.why for failure in result.failures)


def test_condor_writes_a_match_time_reference_per_requested_gpu() -> None:
    one = gpu_memory_expression(1)
    assert one == 'eval(strcat("GPUs_",replaceall("-",split(AssignedGPUs,", ")[0],"_"),".GlobalMemoryMb"))'
    two = gpu_memory_expression(2)
    assert two.startswith("min({") and "[1]" in two
    filled = fill_match_time(f"'--batch' '{GPU_MEMORY_MARK}'", 1)
    assert filled == "'--batch' '$$([" + one.replace('"', '""') + "])'"
    assert fill_match_time("'plain'", 1) == "'plain'"


@pytest.mark.condor_pool
def test_pool_nodes_on_different_gpus_see_each_gpus_memory(condor_pool: Pool) -> None:
    workdir = condor_pool.workdir("gpusizes")
    out = workdir / "out"
    out.mkdir()
    _pipeline(workdir, out)
    condor_pool.give(workdir)
    done = condor_pool.dagflow(["submit", "pipeline.yaml", "--json"], cwd=workdir)
    run_id = json.loads(done.stdout)["run_id"]

    def ended() -> dict | None:
        status = json.loads(condor_pool.dagflow(["status", run_id, "--json"], cwd=workdir, check=False).stdout)
        return status if status["state"] not in ("running", "not-started") else None

    status = condor_pool.wait_until(ended, f"run {run_id} to end", timeout=900)
    assert status["state"] == "succeeded", status  # type: ignore[index]
    memory = _pool_gpu_memory(condor_pool)
    seen = _results(out)
    assigned = {fields[3] for fields in seen.values()}
    assert assigned == set(memory)  # one node on each GPU
    for fields in seen.values():
        assert fields[1] == fields[2] == str(memory[fields[3]])  # the assigned GPU's GlobalMemoryMb
    assert sorted(int(fields[1]) for fields in seen.values()) == sorted(memory.values())
    assert len(set(memory.values())) == 2  # a smaller and a bigger card


def _pool_gpu_memory(pool: Pool) -> dict[str, int]:
    """GPU id -> GlobalMemoryMb, as the startd advertises its GPUs."""
    done = pool.run(["condor_status", "-long"])
    memory = {}
    for ad in re.findall(r"^GPUs_GPU_\w+ = \[(.*)\]$", done.stdout, re.MULTILINE):
        memory[re.search(r'Id = "([^"]+)"', ad).group(1)] = int(re.search(r"GlobalMemoryMb = (\d+)", ad).group(1))
    return memory


@pytest.mark.slow
def test_batch_node_wrapper_fills_it_from_the_visible_devices(tmp_path: Path) -> None:
    """Slurm and Grid Engine run nodes through dagflow.engines.batch.node, which asks nvidia-smi."""
    import subprocess
    import sys

    from test_local_support import cli_env

    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nprintf '0, Tesla V100, 16384, 7.0, 550.1, 0\\n1, A100, 40960, 8.0, 550.1, 0\\n'\n")
    fake.chmod(0o755)
    out = tmp_path / "seen.txt"
    argv = [
        sys.executable,
        "-c",
        f"import os, sys; open({str(out)!r}, 'w').write(sys.argv[1] + ' ' + os.environ['BATCH_GPU_MB'])",
        GPU_MEMORY_MARK,
    ]

    def wrapper(devices: str) -> subprocess.CompletedProcess[str]:
        env = {**cli_env(), "PATH": f"{fake.parent}:{os.environ['PATH']}", "CUDA_VISIBLE_DEVICES": devices}
        return subprocess.run(
            [sys.executable, "-m", "dagflow.engines.batch.node", "--journal", str(tmp_path / "journal.jsonl"),
             "--logs", str(tmp_path), "--node", "train.one", "--workdir", str(tmp_path),
             "--env", f"BATCH_GPU_MB=x{GPU_MEMORY_MARK}", "--", *argv],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    done = wrapper("1")
    assert done.returncode == 0, done.stderr + (tmp_path / "train.one.err").read_text()
    assert out.read_text() == "40960 x40960"
    done = wrapper("0,1")
    assert done.returncode == 0 and out.read_text() == "16384 x16384"  # the smaller of the two
    done = wrapper("")
    assert done.returncode == 1
    assert "the job was given no GPU" in (tmp_path / "train.one.err").read_text()
    assert '"s":"failed"' in (tmp_path / "journal.jsonl").read_text().replace(" ", "")


@pytest.mark.slow
def test_compiled_reference_passes_lint_and_other_dollars_do_not(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    _pipeline(tmp_path, out)
    done = dagflow_cli("compile", "pipeline.yaml", "-o", "dag", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    dag = tmp_path / "dag" / "sizes.dag"
    text = dag.read_text()
    assert text.count("$$([eval(strcat(") == 4  # argv and env of both nodes
    assert dagflow_cli("lint", "dag", cwd=tmp_path).returncode == 0
    dag.write_text(text.replace("$$([eval(", "$$([evil(", 1))
    linted = dagflow_cli("lint", "dag", cwd=tmp_path)
    assert linted.returncode == 2 and "would expand as a macro" in linted.stderr
