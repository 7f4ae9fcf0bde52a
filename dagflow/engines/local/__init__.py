"""The local engine: runs a Plan's nodes as processes on this machine, like a personal DAGMan.

from dagflow.engines.local import RunOptions, run_local, resume_local
result = run_local(plan, RunOptions(runs_dir=Path(".dagflow/runs"), jobs=4))
result.state, result.states, result.exit_code
"""

from dagflow.engines.local.engine import LocalEngine, check_runnable, prepare_run, resume_local, run_local
from dagflow.engines.local.options import RunOptions
from dagflow.engines.local.runner import LocalRunner
from dagflow.run.reporting import JsonReporter, PlainReporter, Reporter, RunInfo
from dagflow.run.result import Failure, RunResult

__all__ = [
    "Failure",
    "JsonReporter",
    "LocalEngine",
    "LocalRunner",
    "PlainReporter",
    "Reporter",
    "RunInfo",
    "RunOptions",
    "RunResult",
    "check_runnable",
    "prepare_run",
    "resume_local",
    "run_local",
]
