"""The condor engine's command-line options, apart from the engine so that the CLI can offer every
engine's flags without importing the engines (engines/registry.py `options`)."""

from __future__ import annotations

from dagflow.engines.base import Capabilities, EngineDeclaration, EngineOption

DATA_MODES = ("transfer", "shared")  # the engine's data modes (transfer.py); the first is the default
# transfer mode: the most MiB a node's job sends back unless the pipeline's condor block says otherwise
# (HTCondor's max_transfer_output_mb; HTCondor itself has no limit by default)
DEFAULT_MAX_TRANSFER_OUTPUT_MB = 10240
_STARTING = frozenset({"run", "submit"})  # options that shape a new run's submission
CONDOR_OPTIONS = (
    EngineOption("schedd", ("--name", "--schedd"), "condor: schedd to submit to (default: the local one).",
                 commands=_STARTING),
    EngineOption("pool", ("--pool",), "condor: collector that knows the schedd.", commands=_STARTING),
    EngineOption("max_gpu_jobs", ("--max-gpu-jobs",), "condor: GPU nodes DAGMan keeps submitted at once "
                 "(MAXJOBS gpu N).", int, 16, commands=_STARTING, min=1),
    EngineOption("data_mode", ("--data-mode",), "condor: transfer (nothing shared: HTCondor moves each node's "
                 "declared inputs, scripts and outputs) or shared (jobs run in the pipeline's directory) "
                 "(default: the pipeline's condor.data_mode, else transfer).", commands=_STARTING,
                 metavar="|".join(DATA_MODES)),
    EngineOption("accounting_group", ("--accounting-group",), "condor: the accounting group the run's jobs "
                 "count against (default: the pipeline's condor.accounting_group).", commands=_STARTING),
    EngineOption("accounting_group_user", ("--accounting-group-user",), "condor: the user within that group "
                 "(default: the pipeline's condor.accounting_group_user).", commands=_STARTING),
    EngineOption("batch_name", ("--batch-name",), "condor: the name condor_q shows the run's jobs under "
                 "(default: the pipeline's condor.batch_name, else the run id).", commands=_STARTING),
    EngineOption("dry_run", ("--dry-run",), "condor: print the DAGMan job's submit description; submit nothing.",
                 bool, False, commands=frozenset({"submit", "resubmit"})),
)


# The transfer data mode (the default) shares nothing: a search's objective node under early stopping
# streams its metric lines back on its stderr (stream_error; engines/condor/progress.py), read where the
# `progress_files` feature says.
ENGINE = EngineDeclaration(
    "dagflow.engines.condor.engine:CondorEngine",
    CONDOR_OPTIONS,
    Capabilities(streams_progress=True),
    legacy_marker="condor/run.json",
    spec_check="dagflow.engines.condor.spec_checks:check_spec",
    section="dagflow.engines.condor.sections:SECTION",  # its `condor:` block, `requirements` and `classads`
    provides=(
        ("compile", "dagflow.engines.condor.compile:compile_dag"),  # `dagflow compile`
        ("lint", "dagflow.engines.condor.lint"),  # `dagflow lint`
        ("cron", "dagflow.engines.condor.cron"),  # `dagflow schedule install --condor`
        ("progress_files", "dagflow.engines.condor.progress:progress_files"),  # search early stopping
        ("locate_runs", "dagflow.engines.condor.locate:run_dirs"),  # a run id -> its run dirs, from the schedd
    ),
)
