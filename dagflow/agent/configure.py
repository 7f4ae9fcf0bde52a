"""`dagflow agent configure`: detect, render, check with HTCondor's reader, install atomically, reconfig."""

from __future__ import annotations

import logging
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from dagflow.agent.condor_config import ConfigError, NodeFacts, read_params, render
from dagflow.agent.imds import Ec2Identity, Imds
from dagflow.files import write_atomic
from dagflow.gpus import GpuSummary, detect_gpus

log = logging.getLogger("dagflow.agent")

DEFAULT_CONFIG_DIR = Path("/etc/condor/config.d")
DEFAULT_TOKEN_DIR = Path("/etc/condor/tokens.d")
CONFIG_FILE_NAME = "50-dagflow-agent.conf"
INSTALLED_TOKEN_NAME = "dagflow-pool"


@dataclass
class ConfigureOptions:
    config_dir: Path = DEFAULT_CONFIG_DIR
    central_manager: str | None = None
    token_file: Path | None = None
    token_dir: Path = DEFAULT_TOKEN_DIR
    region: str | None = None  # overrides the EC2 region (e.g. off EC2)
    imds_endpoint: str | None = None
    imds_timeout_s: float = 1.0
    dry_run: bool = False
    reconfig: bool = True


@dataclass
class ConfigureResult:
    path: Path
    text: str
    changed: bool
    token_installed: Path | None = None
    reconfigured: bool = False
    notes: list[str] = field(default_factory=list)


def _check_token(token_file: Path) -> bytes:
    try:
        info = token_file.stat()
    except OSError as error:
        raise ConfigError(f"token file {token_file}: {error.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"token file {token_file} is not a regular file")
    if info.st_mode & 0o077:
        raise ConfigError(
            f"token file {token_file} is readable by others (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"run `chmod 600 {token_file}` first"
        )
    data = token_file.read_bytes()
    if not data.strip():
        raise ConfigError(f"token file {token_file} is empty")
    return data


def _install_token(token_file: Path, token_dir: Path, dry_run: bool) -> tuple[Path, bool]:
    """Make the token available in token_dir (0700) as a 0600 file; returns (path, whether it was written)."""
    data = _check_token(token_file)
    if token_file.absolute().parent == token_dir.absolute():
        return token_file, False
    target = token_dir / INSTALLED_TOKEN_NAME
    if target.exists() and target.read_bytes() == data and not stat.S_IMODE(target.stat().st_mode) & 0o077:
        return target, False
    if not dry_run:
        token_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(target, data, mode=0o600)
    return target, True


def check_config_text(text: str) -> None:
    """Load `text` with HTCondor's config reader; ConfigError (with HTCondor's message) if it rejects it."""
    with tempfile.TemporaryDirectory(prefix="dagflow-config-check-") as scratch:
        candidate = Path(scratch) / CONFIG_FILE_NAME
        candidate.write_text(text, encoding="utf-8")
        read_params(candidate, ["STARTD_ATTRS"])


def configure(
    options: ConfigureOptions,
    gpus: GpuSummary | None = None,
    identity: Ec2Identity | None = None,
    detect: bool = True,
) -> ConfigureResult:
    """Write the node's config file. `detect=False` uses the given gpus/identity as they are (tests)."""
    if detect:
        gpus = detect_gpus()
        identity = Imds(options.imds_endpoint, options.imds_timeout_s).identity()
    notes = []
    notes.append(f"GPUs: {gpus.count} x {gpus.model} ({gpus.source})" if gpus else "GPUs: none found")
    notes.append(f"EC2: {identity.instance_id} {identity.instance_type}" if identity else "EC2: not on EC2")

    token_path = None
    token_written = False
    if options.token_file is not None:
        token_path, token_written = _install_token(options.token_file, options.token_dir, options.dry_run)
    facts = NodeFacts(
        gpus=gpus,
        identity=identity,
        region=options.region or (identity.region if identity else None),
        central_manager=options.central_manager,
        token_dir=token_path.parent if token_path else None,
    )
    text = render(facts)
    check_config_text(text)

    path = options.config_dir / CONFIG_FILE_NAME
    current = path.read_text(encoding="utf-8") if path.exists() else None
    changed = current != text
    result = ConfigureResult(path=path, text=text, changed=changed, notes=notes)
    if token_written:
        result.token_installed = token_path
    if options.dry_run:
        return result
    if changed:
        write_atomic(path, text.encode("utf-8"), mode=0o644)
    if (changed or token_written) and options.reconfig:
        result.reconfigured = _reconfig(result.notes)
    return result


def _reconfig(notes: list[str]) -> bool:
    if shutil.which("condor_reconfig") is None:
        notes.append("condor_reconfig not found: the daemons read the file when they start")
        return False
    try:
        completed = subprocess.run(["condor_reconfig"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        notes.append(f"condor_reconfig failed: {error}")
        return False
    if completed.returncode != 0:
        # At boot the daemons may not run yet; they read the file when they start.
        notes.append(f"condor_reconfig exited {completed.returncode}: {completed.stderr.strip()[:200]}")
        return False
    return True
