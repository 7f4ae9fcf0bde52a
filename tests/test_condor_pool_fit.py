"""pool_fit.py's rule on ads as the test pool writes them (condor_status -long of a partitionable slot whose
A100 runs another job, condor_submit -dry-run of GPU jobs): a job the busy GPU would run fits the machine
whole (busy); one no GPU of the pool could run never matches, and says which limit (#43 items 6 and 11)."""

from __future__ import annotations

from dagflow.engines.condor import pool_fit

GPU_A = ('[ Id = "GPU-a0223334"; Capability = 7.0; DeviceName = "Tesla V100-PCIE-16GB"; '
         "GlobalMemoryMb = 24220 ]")  # fmt: skip
GPU_B = '[ Id = "GPU-b1223334"; Capability = 8.0; DeviceName = "A100-SXM4-40GB"; GlobalMemoryMb = 47661 ]'
SLOTS = f"""\
Arch = "X86_64"
AvailableGPUs = {{ GPUs_GPU_a0223334 }}
CondorVersion = "$CondorVersion: 25.14.0 2026-11-23 PRE-RELEASE-UWCS $"
Cpus = 4
Disk = 79999748
FileSystemDomain = "vm"
GPUs = 1
GPUs_GPU_a0223334 = {GPU_A}
GPUs_GPU_b1223334 = {GPU_B}
HasFileTransfer = true
Memory = 15872
Name = "slot1@vm"
OpSys = "LINUX"
SlotType = "Partitionable"
TotalSlotCpus = 8
TotalSlotDisk = 80000000
TotalSlotGPUs = 2
TotalSlotMemory = 16384

Name = "slot1_1@vm"
SlotType = "Dynamic"
AvailableGPUs = {{ GPUs_GPU_b1223334 }}
GPUs_GPU_b1223334 = {GPU_B}
GPUs = 1
"""
REQUIREMENTS = (
    '(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (versionGE(split(TARGET.CondorVersion)[1],'
    '"25.12.0") || (TARGET.Disk >= RequestDisk)) && (TARGET.Memory >= RequestMemory) && '
    "(countMatches(MY.RequireGPUs,TARGET.AvailableGPUs) >= RequestGPUs) && "
    "((TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer))"
)


def job(gpu_memory: int, gpus: int = 1, memory: int = 64) -> str:
    return (f"Dry-Run job(s)\nClusterId=1\nFileSystemDomain=\"vm\"\nRequestCpus=1\nRequestDisk=1000\n"
            f"RequestGPUs={gpus}\nRequestMemory={memory}\nRequireGPUs=GlobalMemoryMb >= GPUsMinMemory\n"
            f"GPUsMinMemory={gpu_memory}\nRequirements={REQUIREMENTS}\n")  # fmt: skip


def _machines() -> list:
    return pool_fit.whole_machines(pool_fit.parse_ads(SLOTS))


def test_a_job_the_busy_gpu_would_run_fits_the_machine_whole() -> None:
    machines = _machines()
    assert len(machines) == 1  # the dynamic slot is part of its machine, not one of its own
    ad = pool_fit.parse_ads(job(40000))[0]
    partitionable = pool_fit.parse_ads(SLOTS)[0]
    assert not partitionable.matches(ad)  # as the slot is now: the A100 is taken
    assert pool_fit.ever_matches(ad, machines)


def test_a_job_no_gpu_could_run_never_matches_and_says_why() -> None:
    machines = _machines()
    ad = pool_fit.parse_ads(job(204800))[0]
    assert not pool_fit.ever_matches(ad, machines)
    assert pool_fit.never_why(ad, machines) == "no GPU in the pool has GlobalMemoryMb >= 204800"
    three = pool_fit.parse_ads(job(1000, gpus=3))[0]
    assert not pool_fit.ever_matches(three, machines)
    assert pool_fit.never_why(three, machines) == "it asks for 3 GPUs; the largest machine has 2"
    big = pool_fit.parse_ads(job(1000, memory=65536))[0]
    assert pool_fit.never_why(big, machines) == "it asks for 65536 MB memory; the largest machine has 16384 MB"


def test_a_local_universe_job_needs_no_machine() -> None:
    local = pool_fit.parse_ads(job(204800, memory=65536) + "JobUniverse=12\n")[0]
    assert pool_fit.ever_matches(local, _machines())


def test_no_ads_no_verdict() -> None:
    assert pool_fit.parse_ads("") == []
    assert pool_fit.whole_machines([]) == []
