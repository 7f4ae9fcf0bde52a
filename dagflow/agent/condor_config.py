"""The node's HTCondor configuration file: render it, check it with HTCondor's own reader, read it back.

HTCondor's config reader runs at `import htcondor2` and exits the process on a bad file, so checks run
in a child Python with CONDOR_CONFIG pointing at the file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import classad2

from dagflow.agent.imds import Ec2Identity
from dagflow.errors import DagflowError
from dagflow.gpus import GpuSummary

# Config values are raw text: `$(` would expand a macro and a newline would end the line, so strings
# taken from the driver or IMDS are advertised only when they stay inside this set.
_SAFE_STRING = re.compile(r"[A-Za-z0-9 ._:()/+,-]{1,128}")
_HOST = re.compile(r"[A-Za-z0-9.-]+(:[0-9]{1,5})?")


class ConfigError(DagflowError):
    """The rendered configuration is not valid HTCondor configuration, or an input is unusable."""


@dataclass(frozen=True, slots=True)
class NodeFacts:
    gpus: GpuSummary | None
    identity: Ec2Identity | None
    region: str | None  # DagflowRegion: --region, else the EC2 region
    central_manager: str | None
    token_dir: Path | None  # set when token authentication is configured


def _string(value: str | None) -> str | None:
    if value is None or not _SAFE_STRING.fullmatch(value):
        return None
    return classad2.quote(value)


def node_attributes(facts: NodeFacts) -> dict[str, str]:
    """Machine ad attributes this node advertises (name -> ClassAd expression text), in file order."""
    attributes: dict[str, str | None] = {"HAS_GPU": "True" if facts.gpus else "False"}
    if facts.gpus:
        gpus = facts.gpus
        attributes |= {
            "DagflowGpuCount": str(gpus.count),
            "DagflowGpuModel": _string(gpus.model),
            # GPU discovery may publish this name too (homogeneous nodes); ours is the smallest GPU's.
            "GPUs_GlobalMemoryMb": str(gpus.memory_mb),
            "CUDACapability": repr(gpus.capability) if gpus.capability is not None else None,
            "CUDADriverVersion": _string(gpus.driver_version),
        }
    attributes["DagflowRegion"] = _string(facts.region)
    if facts.identity:
        ec2 = facts.identity
        attributes |= {
            "DagflowAvailabilityZone": _string(ec2.availability_zone),
            "EC2InstanceId": _string(ec2.instance_id),
            "EC2InstanceType": _string(ec2.instance_type),
            "EC2Lifecycle": _string(ec2.lifecycle),
        }
    return {name: value for name, value in attributes.items() if value is not None}


def render(facts: NodeFacts) -> str:
    """The config file's text. Deterministic (no timestamps), so running configure twice changes nothing."""
    lines = [
        "# Written by `dagflow agent configure` at boot; re-run it rather than editing this file.",
        "use role : execute",
    ]
    if facts.central_manager:
        if not _HOST.fullmatch(facts.central_manager):
            raise ConfigError(f"central manager {facts.central_manager!r} is not a host name or host:port")
        lines.append(f"CONDOR_HOST = {facts.central_manager}")
    if facts.gpus:
        lines += [
            f"# {facts.gpus.count} x {facts.gpus.model}, found through {facts.gpus.source}",
            "use feature : GPUs",
        ]
    attributes = node_attributes(facts)
    lines += [f"{name} = {value}" for name, value in attributes.items()]
    lines.append("STARTD_ATTRS = $(STARTD_ATTRS) " + " ".join(attributes))
    if facts.token_dir is not None:
        # Daemons read IDTOKENS from SEC_TOKEN_SYSTEM_DIRECTORY (SEC_TOKEN_DIRECTORY is the per-user one).
        lines += [
            "use security : recommended_v9_0",
            "SEC_DEFAULT_AUTHENTICATION_METHODS = IDTOKENS, FS",
            f"SEC_TOKEN_SYSTEM_DIRECTORY = {facts.token_dir}",
        ]
    return "\n".join(lines) + "\n"


# Reads the named params, plus every param that STARTD_ATTRS lists.
_READER = """
import json, re, sys
import htcondor2
names = json.loads(sys.argv[1])
names += [n for n in re.split(r"[\\s,]+", htcondor2.param.get("STARTD_ATTRS") or "") if n]
print(json.dumps({name: htcondor2.param.get(name) for name in names}))
"""


def read_params(config_file: Path, names: Iterable[str], timeout_s: float = 60.0) -> dict[str, str | None]:
    """Load `config_file` alone with HTCondor's config reader; return the named params' values and
    those of every attribute STARTD_ATTRS lists.

    Raises ConfigError carrying HTCondor's own message when the reader rejects the file.
    """
    env = {key: value for key, value in os.environ.items() if not key.upper().startswith("_CONDOR_")}
    env["CONDOR_CONFIG"] = str(Path(config_file).absolute())
    result = subprocess.run(
        [sys.executable, "-c", _READER, json.dumps(list(names))],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s,
        check=False,
    )
    if result.returncode != 0:
        message = (result.stderr.strip() or result.stdout.strip() or f"exit code {result.returncode}").splitlines()
        raise ConfigError(f"HTCondor rejected the configuration {config_file}: {' / '.join(message[-3:])}")
    return json.loads(result.stdout.strip().splitlines()[-1])
