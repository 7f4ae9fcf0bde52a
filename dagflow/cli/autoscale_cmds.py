"""`dagflow autoscale`: size the pool's EC2 GPU groups from the jobs waiting in the schedd."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from dagflow.cli.common import fail
from dagflow.cli.root import app
from dagflow.errors import EXIT_UNREACHABLE, EXIT_USAGE, DagflowError


@app.command("autoscale")
def autoscale_command(
    policy: Annotated[
        Path | None, typer.Option(help="Autoscaling policy (default: the shipped policies/autoscale.yaml).")
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Run one loop and exit.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print every action instead of doing it.")] = False,
    interval: Annotated[
        float | None, typer.Option(min=1, help="Seconds between loops (default: the policy's).")
    ] = None,
    state_file: Annotated[
        Path, typer.Option(help="Where draining nodes and capacity timeouts are remembered across restarts.")
    ] = Path("/var/lib/dagflow/autoscale-state.json"),
    endpoint_url: Annotated[str | None, typer.Option(help="AWS endpoint URL (a test server).")] = None,
    pool: Annotated[str | None, typer.Option(help="Collector to query (default: this host's config).")] = None,
    jobs_file: Annotated[
        Path | None, typer.Option(help="Read idle job ads from this file (condor_q -l output) instead of the schedd.")
    ] = None,
    nodes_file: Annotated[
        Path | None, typer.Option(help="Read startd ads from this file (condor_status -l) instead of the collector.")
    ] = None,
) -> None:
    """Scale EC2 Auto Scaling groups to the idle jobs in the schedd; drain idle nodes before removing them.

    Each idle job is matched (classad2) against every group's machine template in policies/autoscale.yaml,
    then bin-packed onto instances; groups are filled in priority and region order, and a group that
    reports a capacity error is skipped for capacity_timeout_s while its demand overflows to the next.

    Scale-in drains idle nodes (past idle_grace_s) and terminates them with decrement once drained;
    at most max_scale_in_fraction of the pool per loop, never more than half. Jobs that match no group
    are reported. Each loop prints its decision as a table. Exit code 2 on a bad policy or input file,
    3 when the schedd, collector or AWS cannot be reached with --once.
    """
    from dagflow.autoscale.cloud import AutoScaling, CloudError
    from dagflow.autoscale.demand import InMemorySchedd, ScheddDemand
    from dagflow.autoscale.loop import Autoscaler
    from dagflow.autoscale.policy import load_policy
    from dagflow.autoscale.pool import AdsFilePool, CondorPool, PoolError
    from dagflow.autoscale.state import StateFile

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        loaded = load_policy(policy)
    except DagflowError as error:
        fail(error)
    try:
        schedd = InMemorySchedd.from_file(jobs_file) if jobs_file else None
        node_source = AdsFilePool(str(nodes_file)) if nodes_file else None
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE) from None
    try:
        demand = ScheddDemand(schedd, extra_attributes=loaded.settings.demand_attributes)
        pool_control = node_source or CondorPool(pool)
    except Exception as error:  # htcondor2 cannot locate the collector
        print(f"error: cannot reach the pool: {error}", file=sys.stderr)
        raise typer.Exit(EXIT_UNREACHABLE) from None
    scaler = Autoscaler(
        loaded,
        demand,
        pool_control,
        AutoScaling(endpoint_url),
        StateFile(state_file),
        dry_run=dry_run,
        emit=lambda text: print(text, end="", flush=True),
    )
    if not once:
        scaler.run_forever(interval)
        return
    try:
        result = scaler.run_once()
    except ValueError as error:  # an unreadable state file
        print(f"error: {error}", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE) from None
    except (CloudError, PoolError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise typer.Exit(EXIT_UNREACHABLE) from None
    except Exception as error:  # htcondor2's query errors (no schedd, no collector)
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        raise typer.Exit(EXIT_UNREACHABLE) from None
    if result.errors:
        raise typer.Exit(1)
