"""A dagflow job executor from outside dagflow, the smallest there is: each node a detached process on this
machine, started through a wrapper (wrap.py) that outlives the driver and records the exit code. Every job
keeps its files in a directory named by its key, so any driver finds it again (executor.py)."""

from dagflow.engines.base import Capabilities, EngineDeclaration
from dagflow.engines.jobs.options import SCHEDULER_OPTIONS

ENGINE = EngineDeclaration("dagflow_procjobs.executor:ProcJobs", SCHEDULER_OPTIONS, Capabilities(streams_progress=True))
