"""A dagflow job executor from outside dagflow: each node is one HTCondor job submitted through the schedd
with the htcondor2 bindings, no DAGMan, as Snakemake's HTCondor executor plugin does. dagflow's scheduler
owns the DAG, retries, timeouts, the cache and exactly-once after a kill -9; this package writes run_job,
check_active and cancel_jobs (executor.py) and declares its own block and step field (section.py).

Its jobs run in the pipeline's directory (should_transfer_files = NO): it needs a filesystem the access
point and the execute nodes share."""

from dagflow.engines.base import Capabilities, EngineDeclaration
from dagflow.engines.jobs.options import SCHEDULER_OPTIONS

ENGINE = EngineDeclaration(
    "dagflow_htjobs.executor:HTJobs",
    SCHEDULER_OPTIONS,
    Capabilities(streams_progress=True),
    section="dagflow_htjobs.section:SECTION",
)
