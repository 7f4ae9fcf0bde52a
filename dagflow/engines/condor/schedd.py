"""Talking to a condor_schedd through the htcondor2 bindings: build the DAGMan job, submit it, remove it.

Which schedd: `--name` and/or `--pool` are looked up in the collector (condor_submit_dag -name/-pool);
with neither, the local schedd of the HTCondor configuration in force (CONDOR_CONFIG, _CONDOR_* vars).
Every failure of the bindings becomes one CondorUnreachableError line that says which schedd was tried.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dagflow.errors import EXIT_UNREACHABLE, DagflowError

# Where HTCondor's packages install condor_dagman; used when it is not on this machine's PATH (a
# remote schedd runs DAGMan on its own host, where the packages put it here).
DEFAULT_DAGMAN = "/usr/bin/condor_dagman"
# What the htcondor2 bindings set CONDOR_CONFIG to when it is unset and they find no condor_config.
NO_CONFIG = "/dev/null"


class CondorUnreachableError(DagflowError):
    exit_code = EXIT_UNREACHABLE


class CondorSubmitError(DagflowError):
    """The DAG cannot be turned into a DAGMan job (bad rescue number, unwritable files)."""


@dataclass(frozen=True, slots=True)
class ScheddTarget:
    name: str | None = None  # schedd name in the pool (condor_submit_dag -name)
    pool: str | None = None  # collector host[:port] (condor_submit_dag -pool)

    def describe(self) -> str:
        if self.name is None and self.pool is None:
            config = os.environ.get("CONDOR_CONFIG", "the default HTCondor configuration")
            if config == NO_CONFIG:
                return ("the local schedd (no HTCondor configuration: set CONDOR_CONFIG to your pool's "
                        "condor_config, or give --pool and --name)")
            return f"the local schedd (configuration: {config})"
        where = f"schedd {self.name!r}" if self.name else "the pool's schedd"
        return where + (f" in pool {self.pool}" if self.pool else "")


def _error_text(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__


@contextlib.contextmanager
def _captured_output() -> Iterator[list[str]]:
    """The bindings' C++ side prints to file descriptors 1 and 2 (e.g. "Running rescue DAG 1"); keep
    that off the terminal and hand it to the caller, who puts it into one line."""
    lines: list[str] = []
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as sink:
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            yield lines
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            lines.extend(line for line in sink.read().decode("utf-8", "replace").splitlines() if line.strip())


def dagman_path() -> str:
    return shutil.which("condor_dagman") or DEFAULT_DAGMAN


def dagman_description(dag: Path, options: dict[str, int | bool | str]):  # -> htcondor2.Submit
    """The DAGMan job's submit description, from htcondor2.Submit.from_dag (writes <dag>.condor.sub).

    Runs in the DAG's directory, as condor_submit_dag does, so DAGMan's files land beside the DAG.
    """
    import htcondor2

    options = {"DagmanPath": dagman_path(), **options}
    if dag.with_name(dag.name + ".condor.sub").exists():
        options.setdefault("UpdateSubmit", True)
    with contextlib.chdir(dag.parent), _captured_output() as printed:
        try:
            return htcondor2.Submit.from_dag(str(dag), options)
        except Exception as error:  # htcondor2 raises HTCondorException (and ValueError on bad options)
            detail = next((line for line in printed if "ERROR" in line), "")
            message = _error_text(error) + (f" ({' '.join(detail.split())})" if detail else "")
            raise CondorSubmitError(f"cannot build the DAGMan job for {dag}: {message}") from None


def connect(target: ScheddTarget):  # -> htcondor2.Schedd
    import htcondor2

    try:
        if target.name is None and target.pool is None:
            return htcondor2.Schedd()
        collector = htcondor2.Collector(target.pool) if target.pool else htcondor2.Collector()
        if target.name:
            ad = collector.locate(htcondor2.DaemonType.Schedd, target.name)
        else:
            ad = collector.locate(htcondor2.DaemonType.Schedd)
        return htcondor2.Schedd(ad)
    except Exception as error:
        raise CondorUnreachableError(f"cannot reach {target.describe()}: {_error_text(error)}") from None


def reach(target: ScheddTarget):  # -> htcondor2.Schedd
    """The schedd, once it has answered a query that matches nothing (connect() alone contacts no one)."""
    schedd = connect(target)
    with _captured_output():
        try:
            schedd.query(constraint="false", projection=["ClusterId"])
        except Exception as error:
            raise CondorUnreachableError(f"cannot submit to {target.describe()}: {_error_text(error)}") from None
    return schedd


def job_ad(target: ScheddTarget, cluster: int, projection: list[str]) -> dict[str, object] | None:
    """The queued job `cluster`.0's attributes in projection; None when it is not queued or the schedd
    cannot be asked (status goes on without it)."""
    try:
        schedd = connect(target)
        with _captured_output():
            ads = schedd.query(constraint=f"ClusterId == {int(cluster)} && ProcId == 0", projection=projection)
    except Exception:  # any failure of the bindings: no answer
        return None
    return {key: ad.eval(key) for ad in ads[:1] for key in projection if key in ad}


def submit_dagman(schedd, target: ScheddTarget, description, dag_dir: Path) -> int:
    """Submit the DAGMan job to schedd (from reach(target)); return its cluster id."""
    with contextlib.chdir(dag_dir), _captured_output():
        try:
            result = schedd.submit(description)
        except Exception as error:
            raise CondorUnreachableError(f"cannot submit to {target.describe()}: {_error_text(error)}") from None
    return int(result.cluster())


def remove_job(target: ScheddTarget, cluster: int, reason: str) -> int:
    """condor_rm the cluster; return how many jobs the schedd removed (0: it was not in the queue)."""
    import htcondor2

    schedd = connect(target)
    try:
        answer = schedd.act(htcondor2.JobAction.Remove, str(cluster), reason=reason)
    except Exception as error:
        raise CondorUnreachableError(
            f"cannot remove job {cluster} from {target.describe()}: {_error_text(error)}"
        ) from None
    success = answer.get("TotalSuccess", 0)
    return success if isinstance(success, int) else 0


def dagman_ads(batch_prefix: str, projection: list[str], history: int) -> list:  # -> list[classad2.ClassAd]
    """The DAGMan jobs (queued, and the newest `history` in the history) whose JobBatchName starts with
    batch_prefix; none when the schedd cannot be asked."""
    import classad2

    constraint = f"JobUniverse == 7 && substr(JobBatchName, 0, {len(batch_prefix)}) == {classad2.quote(batch_prefix)}"
    try:
        schedd = connect(ScheddTarget())
        with _captured_output():
            return [*schedd.query(constraint=constraint, projection=projection),
                    *schedd.history(constraint, projection, match=history)]
    except Exception:  # any failure of the bindings (no schedd, no configuration): no answer
        return []
