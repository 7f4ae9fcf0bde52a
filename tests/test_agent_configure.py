"""`dagflow agent configure`: IMDSv2, the config file read back by HTCondor's own reader, and a
compiled GPU step's Requirements matched (classad2) against what the node then advertises."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import classad2
import pytest
from aws_fixtures import ImdsState
from condor_helpers import advertised_attributes
from test_autoscale_aws import condor_submit_requirements
from typer.testing import CliRunner

from dagflow.agent.condor_config import ConfigError, read_params
from dagflow.agent.configure import CONFIG_FILE_NAME, ConfigureOptions, configure
from dagflow.agent.imds import Imds
from dagflow.autoscale.matching import htcondor_match
from dagflow.autoscale.policy import add_gpu_ads, load_policy
from dagflow.cli import app
from dagflow.gpus import GpuSummary, parse_nvidia_smi
from dagflow.plan.model import Resources, StepInfo
from dagflow.policies import gpu_classes

DATA = Path(__file__).parent / "data"
TOKEN = "eyJhbGciOiJIUzI1NiIsImtpZCI6IlBPT0wifQ.eyJzdWIiOiJjb25kb3JAcG9vbCJ9.c2VjcmV0LXNpZ25hdHVyZQ"


def summary(capture: str) -> GpuSummary:
    result = GpuSummary.of(parse_nvidia_smi((DATA / capture).read_text()), "nvidia-smi")
    assert result is not None
    return result


def token_file(directory: Path, mode: int = 0o600) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "pool.token"
    path.write_text(TOKEN + "\n")
    path.chmod(mode)
    return path


def test_imds_v2_token_then_metadata(imds: tuple[str, ImdsState]) -> None:
    endpoint, state = imds
    identity = Imds(endpoint).identity()
    assert identity is not None
    assert (identity.instance_id, identity.instance_type, identity.region) == (
        "i-0123456789abcdef0",
        "p4de.24xlarge",
        "us-east-1",
    )
    assert (identity.availability_zone, identity.lifecycle) == ("us-east-1b", "spot")
    assert state.requests[0][:2] == ("PUT", "/latest/api/token")
    assert all(status == 200 for _, _, status in state.requests)  # every GET carried a valid token


def test_off_ec2_is_quick_and_absent(no_imds: str) -> None:
    started = time.monotonic()
    assert Imds(no_imds, timeout_s=0.5).identity() is None
    assert time.monotonic() - started < 2


def test_config_read_back_by_htcondor(tmp_path: Path, imds: tuple[str, ImdsState]) -> None:
    endpoint, _ = imds
    options = ConfigureOptions(
        config_dir=tmp_path / "config.d",
        central_manager="cm.example.org:9618",
        token_file=token_file(tmp_path / "secrets"),
        token_dir=tmp_path / "tokens.d",
        reconfig=False,
    )
    result = configure(options, summary("nvidia-smi-8xA100-80GB.csv"), Imds(endpoint).identity(), detect=False)
    path = tmp_path / "config.d" / CONFIG_FILE_NAME
    assert result.changed and path.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert TOKEN not in path.read_text()  # the token's text never enters the world-readable file
    installed = tmp_path / "tokens.d" / "dagflow-pool"
    assert installed.read_text().strip() == TOKEN
    assert stat.S_IMODE(installed.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "tokens.d").stat().st_mode) == 0o700

    params = read_params(
        path,
        [
            "CONDOR_HOST",
            "COLLECTOR_HOST",
            "DAEMON_LIST",
            "MACHINE_RESOURCE_INVENTORY_GPUs",
            "SEC_TOKEN_SYSTEM_DIRECTORY",
            "SEC_DEFAULT_AUTHENTICATION",
            "SEC_DEFAULT_AUTHENTICATION_METHODS",
        ],
    )
    assert params["CONDOR_HOST"] == "cm.example.org:9618"
    assert params["COLLECTOR_HOST"] == "cm.example.org:9618"
    assert "STARTD" in params["DAEMON_LIST"]
    assert "condor_gpu_discovery" in params["MACHINE_RESOURCE_INVENTORY_GPUs"]  # `use feature : GPUs` expanded
    assert params["SEC_TOKEN_SYSTEM_DIRECTORY"] == str(tmp_path / "tokens.d")
    assert params["SEC_DEFAULT_AUTHENTICATION"].lower() == "required"
    assert params["SEC_DEFAULT_AUTHENTICATION_METHODS"].startswith("IDTOKENS")
    ad = advertised_attributes(path)
    assert ad["HAS_GPU"] is True
    assert (ad["GPUs_GlobalMemoryMb"], ad["CUDACapability"], ad["DagflowGpuCount"]) == (81920, 8.0, 8)
    assert (ad["DagflowRegion"], ad["EC2InstanceId"], ad["EC2InstanceType"], ad["EC2Lifecycle"]) == (
        "us-east-1",
        "i-0123456789abcdef0",
        "p4de.24xlarge",
        "spot",
    )


def test_running_twice_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "reconfig-calls"
    fake = bin_dir / "condor_reconfig"
    fake.write_text(f'#!/bin/sh\necho called >> "{calls}"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    options = ConfigureOptions(config_dir=tmp_path / "config.d", central_manager="cm", region="eu-west-1")
    first = configure(options, summary("nvidia-smi-1xT4.csv"), None, detect=False)
    path = first.path
    before = (path.stat().st_ino, path.stat().st_mtime_ns, path.read_bytes())
    second = configure(options, summary("nvidia-smi-1xT4.csv"), None, detect=False)
    assert first.changed and first.reconfigured
    assert not second.changed and not second.reconfigured
    assert (path.stat().st_ino, path.stat().st_mtime_ns, path.read_bytes()) == before
    assert calls.read_text().count("called") == 1
    assert list(path.parent.iterdir()) == [path]  # no temporary files left behind


def node_ad(config: Path, cpus: int, memory: int, gpus: int) -> classad2.ClassAd:
    """The startd's own resource attributes, its GPU discovery's per-GPU ads (AvailableGPUs), plus what
    the config's STARTD_ATTRS add."""
    ad = advertised_attributes(config)
    for name, value in {
        "Cpus": cpus,
        "Memory": memory,
        "Disk": 500_000_000,
        "GPUs": gpus,
        "OpSys": "LINUX",
        "Arch": "X86_64",
        "Requirements": classad2.ExprTree("START"),
        "START": True,
    }.items():
        ad[name] = value
    add_gpu_ads(ad)
    return ad


def compiled_job(resources: Resources, extra: str | None = None) -> classad2.ClassAd:
    step = StepInfo(
        name="train",
        kind="train",
        axes=("region",),
        resources=resources,
        retries=0,
        retry_unless_exit=(),
        timeout_s=None,
        priority=0,
        metrics=None,
        engine_fields={"condor": {"requirements": [extra]}} if extra else {},
    )
    job = classad2.ClassAd()
    job["RequestCpus"] = resources.cpus
    job["RequestMemory"] = resources.memory_mb
    job["RequestDisk"] = resources.disk_mb * 1024  # condor_submit turns request_disk=NM into KiB
    job["RequestGPUs"] = resources.gpus
    job["Requirements"] = condor_submit_requirements(step, job)
    return job


def test_advertised_node_matches_a_compiled_gpu_step(tmp_path: Path) -> None:
    a100 = configure(
        ConfigureOptions(config_dir=tmp_path / "a100", reconfig=False),
        summary("nvidia-smi-8xA100-80GB.csv"),
        None,
        detect=False,
    ).path
    t4 = configure(
        ConfigureOptions(config_dir=tmp_path / "t4", reconfig=False), summary("nvidia-smi-1xT4.csv"), None, detect=False
    ).path
    cpu = configure(ConfigureOptions(config_dir=tmp_path / "cpu", reconfig=False), None, None, detect=False).path
    a100_ad, t4_ad, cpu_ad = node_ad(a100, 96, 1_140_000, 8), node_ad(t4, 4, 15_000, 1), node_ad(cpu, 16, 31_000, 0)

    classes = {
        "ampere-or-newer": gpu_classes()["ampere-or-newer"].cuda_capability,
        "80gb": gpu_classes()["80gb"].gpu_memory_mb,
    }
    small = Resources(cpus=4, memory_mb=8192, disk_mb=2048, gpus=1, gpu_memory_mb=16384, cuda_capability=7.5)
    job = compiled_job(small)
    assert htcondor_match(job, a100_ad)
    assert not htcondor_match(job, t4_ad)  # 15360 MiB < 16 GiB asked
    assert not htcondor_match(job, cpu_ad)
    fits_t4 = compiled_job(Resources(cpus=2, memory_mb=4096, disk_mb=1024, gpus=1, cuda_capability=7.0))
    assert htcondor_match(fits_t4, t4_ad) and htcondor_match(fits_t4, a100_ad)
    ampere = compiled_job(Resources(cpus=2, memory_mb=4096, gpus=1, cuda_capability=classes["ampere-or-newer"]))
    assert htcondor_match(ampere, a100_ad) and not htcondor_match(ampere, t4_ad)
    big = compiled_job(Resources(cpus=2, memory_mb=4096, gpus=1, gpu_memory_mb=classes["80gb"]))
    assert htcondor_match(big, a100_ad) and not htcondor_match(big, t4_ad)


def test_autoscale_templates_agree_with_the_agent(tmp_path: Path, imds: tuple[str, ImdsState]) -> None:
    """The shipped a100 group's template says what an agent-configured p4de node advertises."""
    endpoint, _ = imds
    path = configure(
        ConfigureOptions(config_dir=tmp_path, reconfig=False),
        summary("nvidia-smi-8xA100-80GB.csv"),
        Imds(endpoint).identity(),
        detect=False,
    ).path
    advertised = advertised_attributes(path)
    template = load_policy().group("a100-use1-spot").machine
    for name in ("HAS_GPU", "GPUs_GlobalMemoryMb", "CUDACapability", "DagflowGpuModel", "DagflowGpuCount"):
        assert advertised[name] == template[name], name
    for name in ("DagflowRegion", "EC2InstanceType", "EC2Lifecycle"):
        assert advertised[name] == template[name], name


def test_htcondor_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.conf"
    broken.write_text("use feature : NoSuchFeature\n")
    with pytest.raises(ConfigError, match=r"NoSuchFeature|Configuration Error"):
        read_params(broken, ["STARTD_ATTRS"])


runner = CliRunner()


def test_cli_dry_run_prints_and_writes_nothing(tmp_path: Path, no_imds: str) -> None:
    result = runner.invoke(
        app, ["agent", "configure", "--dry-run", "-c", "cm.example.org", "--config-dir", str(tmp_path / "c")]
    )
    assert result.exit_code == 0, result.output
    assert "CONDOR_HOST = cm.example.org" in result.stdout
    assert "STARTD_ATTRS = $(STARTD_ATTRS) HAS_GPU" in result.stdout
    assert not (tmp_path / "c").exists()


def test_cli_world_readable_token_is_refused(tmp_path: Path, no_imds: str) -> None:
    loose = token_file(tmp_path / "secrets", mode=0o644)
    result = runner.invoke(
        app,
        ["agent", "configure", "--token-file", str(loose), "--config-dir", str(tmp_path / "c")],
    )
    assert result.exit_code == 2
    assert "readable by others" in result.stderr and "chmod 600" in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "c").exists()


def test_cli_bad_central_manager(tmp_path: Path, no_imds: str) -> None:
    result = runner.invoke(app, ["agent", "configure", "-c", "cm\nEVIL = 1", "--config-dir", str(tmp_path)])
    assert result.exit_code == 2 and "central manager" in result.stderr


class TricklingServer:
    """A real HTTP server on loopback that answers every request one byte per 0.5 s."""

    def __init__(self) -> None:
        import socket
        import threading

        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import threading

        while not self.stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection) -> None:  # type: ignore[no-untyped-def]
        reply = b"HTTP/1.0 200 OK\r\nContent-Length: 40\r\n\r\n" + b"x" * 40
        with connection:
            connection.recv(65536)
            for byte in reply:
                if self.stop.wait(0.5):
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    return

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


@pytest.fixture
def trickling_imds() -> Iterator[str]:
    server = TricklingServer()
    yield server.endpoint
    server.close()


def test_a_trickling_imds_hits_a_whole_request_deadline(trickling_imds: str) -> None:
    from dagflow.agent.imds import ImdsTimeoutError

    started = time.monotonic()
    with pytest.raises(ImdsTimeoutError) as caught:
        Imds(trickling_imds, timeout_s=1.0).identity()
    assert time.monotonic() - started < 20  # a hang guard only; each byte alone comes within 1 s
    assert f"{trickling_imds}: PUT /latest/api/token did not complete within 1 s" in str(caught.value)


def test_cli_configure_gives_up_on_a_trickling_imds(tmp_path: Path, trickling_imds: str) -> None:
    result = runner.invoke(
        app,
        ["agent", "configure", "--dry-run", "-c", "cm.example.org", "--config-dir", str(tmp_path / "c"),
         "--imds-endpoint", trickling_imds],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    assert "did not complete within 1 s" in result.output
    assert "Traceback" not in result.output
