"""`dagflow agent ...`: the node agent that registers an execute node into the pool."""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from dagflow.cli.common import fail
from dagflow.cli.root import app
from dagflow.errors import DagflowError

agent_app = typer.Typer(
    name="agent",
    help="Node agent: configure this execute node for the pool at boot, and drain it on EC2 spot notices.",
    no_args_is_help=True,
)
app.add_typer(agent_app)


@agent_app.command("configure")
def configure_command(
    central_manager: Annotated[
        str | None, typer.Option("--central-manager", "-c", help="The pool's central manager (CONDOR_HOST).")
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(help="IDTOKEN file (mode 0600) for the pool; installed into --token-dir, never into config."),
    ] = None,
    token_dir: Annotated[Path, typer.Option(help="SEC_TOKEN_SYSTEM_DIRECTORY.")] = Path("/etc/condor/tokens.d"),
    config_dir: Annotated[Path, typer.Option(help="HTCondor's config.d directory.")] = Path("/etc/condor/config.d"),
    region: Annotated[
        str | None, typer.Option(help="DagflowRegion to advertise (default: the EC2 region, if on EC2).")
    ] = None,
    imds_endpoint: Annotated[str | None, typer.Option(help="Instance metadata service URL.")] = None,
    reconfig: Annotated[bool, typer.Option(help="Run condor_reconfig after a change, when installed.")] = True,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the file instead of writing it.")] = False,
) -> None:
    """Write this node's HTCondor config file (config.d/50-dagflow-agent.conf), atomically.

    Detects GPUs (NVML, else nvidia-smi) and EC2 identity (IMDSv2; absent off EC2), advertises them
    in the machine ad (HAS_GPU, GPUs_GlobalMemoryMb, CUDACapability, DagflowRegion, EC2InstanceId,
    EC2InstanceType, EC2Lifecycle), points the node at the central manager and configures IDTOKENS.

    The file is checked with HTCondor's own config reader before it is installed. Running it twice
    changes nothing. Exit code 2 on bad input (an unreadable or world-readable token file...).
    """
    from dagflow.agent.configure import ConfigureOptions, configure

    options = ConfigureOptions(
        config_dir=config_dir,
        central_manager=central_manager,
        token_file=token_file,
        token_dir=token_dir,
        region=region,
        imds_endpoint=imds_endpoint,
        dry_run=dry_run,
        reconfig=reconfig,
    )
    try:
        result = configure(options)
    except DagflowError as error:
        fail(error)
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        raise typer.Exit(1) from None
    for note in result.notes:
        print(f"# {note}", file=sys.stderr)
    if dry_run:
        print(f"# would write {result.path} ({'changed' if result.changed else 'unchanged'})", file=sys.stderr)
        if result.token_installed:
            print(f"# would install the token as {result.token_installed} (mode 0600)", file=sys.stderr)
        sys.stdout.write(result.text)
        return
    if result.token_installed:
        print(f"installed token {result.token_installed} (mode 0600)")
    print(f"{'wrote' if result.changed else 'unchanged'} {result.path}")
    if result.reconfigured:
        print("ran condor_reconfig")


@agent_app.command("deploy-dir")
def deploy_dir_command() -> None:
    """Print the folder of the shipped EC2 boot files: the systemd unit and the user-data example.

    deploy/ec2-user-data.sh installs the unit from here; copy the script into a launch template.
    """
    from dagflow.data import data_dir

    try:
        print(data_dir("deploy"))
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        raise typer.Exit(1) from None


@agent_app.command("watch")
def watch_command(
    interval: Annotated[float, typer.Option(min=0.1, help="Seconds between IMDS polls.")] = 5.0,
    machine: Annotated[str | None, typer.Option(help="Machine name to drain (default: this host's FQDN).")] = None,
    on_interruption: Annotated[
        str, typer.Option(help="Drain pace on a spot interruption notice: graceful, quick or fast.")
    ] = "quick",
    on_rebalance: Annotated[
        str, typer.Option(help="Drain pace on a rebalance recommendation: graceful, quick or fast.")
    ] = "graceful",
    imds_endpoint: Annotated[str | None, typer.Option(help="Instance metadata service URL.")] = None,
    iterations: Annotated[
        int | None, typer.Option(min=1, help="Stop after this many polls (default: forever).")
    ] = None,
) -> None:
    """Poll EC2 for a spot interruption notice or a rebalance recommendation; drain the node on one.

    Spot interruption: `condor_drain -quick` (jobs vacate now and go back to the queue).
    Rebalance recommendation: `condor_drain -graceful` (no new jobs; running ones finish).
    Each notice is drained once; a drain that fails is tried again at the next poll. Every action is logged.
    """
    from dagflow.agent.imds import Imds
    from dagflow.agent.watch import DRAIN_MODES, CondorDrainer, Watcher

    for name, mode in (("--on-interruption", on_interruption), ("--on-rebalance", on_rebalance)):
        if mode not in DRAIN_MODES:
            print(f"error: {name} {mode!r}: expected one of {', '.join(DRAIN_MODES)}", file=sys.stderr)
            raise typer.Exit(2)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    drainer = CondorDrainer(machine=machine) if machine else CondorDrainer()
    watcher = Watcher(Imds(imds_endpoint), drainer, on_interruption=on_interruption, on_rebalance=on_rebalance)
    logging.getLogger("dagflow.agent").info("watching %s every %.1fs", watcher.imds.endpoint, interval)
    with contextlib.suppress(KeyboardInterrupt):
        watcher.run(interval_s=interval, iterations=iterations)
