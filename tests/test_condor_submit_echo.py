"""A node job that reuses a claim runs within the second DAGMan submitted it (#28: `dagflow status` must
agree with condor_q). The jobstate log then holds that second's SUBMIT line, and its EXECUTE line only
once DAGMan has read the event log, seconds later; the event log already has the execute event. Status
must show the job running: a SUBMIT of the job the event log already follows is DAGMan's echo, not news.
The SUBMIT of a *new* job of the node (a retry) still wins over the old job's state.

Found by the pool test test_condor_user_path (a running train job shown queued under CI load)."""

from __future__ import annotations

from dagflow.engines.condor import event_log as ev
from dagflow.engines.condor.jobstate import parse_jobstate
from dagflow.engines.condor.observe import fold
from dagflow.plan.index import PlanIndex
from tests.condor_helpers import regional_plan

SECOND = 1740837605


def _states(jobstate: bytes, jobs: dict[str, ev.NodeJob]) -> dict[str, str]:
    index = PlanIndex.of(regional_plan())
    records = fold(index, None, parse_jobstate(jobstate), jobs, dagman_alive=True)
    return {name: record.state for name, record in records.items()}


def _running(cluster: int) -> ev.NodeJob:
    return ev.NodeJob(cluster, state=ev.RUNNING, submitted=SECOND, started=SECOND, updated=SECOND)


def test_a_job_running_in_its_submit_second_is_running() -> None:
    jobstate = (
        f"{SECOND - 3} INTERNAL *** DAGMAN_STARTED 100.0 ***\n{SECOND} fetch.us SUBMIT 7.0 fetch - 1\n"
    ).encode()
    assert _states(jobstate, {"fetch.us": _running(7)})["fetch.us"] == "running"


def test_a_same_second_submit_of_a_new_job_still_wins() -> None:
    jobstate = (
        f"{SECOND - 3} INTERNAL *** DAGMAN_STARTED 100.0 ***\n{SECOND} fetch.us SUBMIT 8.0 fetch - 2\n"
    ).encode()
    assert _states(jobstate, {"fetch.us": _running(7)})["fetch.us"] == "queued"


def test_the_same_jobs_submit_never_wins_and_a_new_jobs_does() -> None:
    later = f"{SECOND + 1} fetch.us SUBMIT 7.0 fetch - 1\n".encode()  # DAGMan's echo, stamped a second later
    assert _states(later, {"fetch.us": _running(7)})["fetch.us"] == "running"
    earlier = f"{SECOND - 1} fetch.us SUBMIT 7.0 fetch - 1\n".encode()
    assert _states(earlier, {"fetch.us": _running(7)})["fetch.us"] == "running"
    retry = f"{SECOND + 1} fetch.us SUBMIT 8.0 fetch - 2\n".encode()
    assert _states(retry, {"fetch.us": _running(7)})["fetch.us"] == "queued"
    executed = f"{SECOND} fetch.us EXECUTE 7.0 fetch - 1\n{SECOND + 2} fetch.us JOB_HELD 7.0 fetch - 1\n".encode()
    assert _states(executed, {"fetch.us": _running(7)})["fetch.us"] == "held"  # other lines win as before


def test_a_status_file_written_after_the_execute_but_before_dagman_read_it_does_not_win() -> None:
    """DAGMan rewrites the node status file at most every 60 s, from the events it has read by then; its
    jobstate lines carry the events' own times. Seen on the pool: evaluate.de executed at :07 (event log and
    jobstate EXECUTE both :07), and a status file stamped later still said submitted, idle: status showed the
    running job queued until DAGMan's next rewrite."""
    from dagflow.engines.condor import status_files as sf

    index = PlanIndex.of(regional_plan())
    snapshot = sf.NodeStatusFile(timestamp=SECOND + 5)
    snapshot.nodes["fetch.us"] = sf.NodeStatusAd(sf.SUBMITTED, "idle", 0, 1, 0)
    lines = f"{SECOND - 6} fetch.us SUBMIT 7.0 fetch - 1\n{SECOND} fetch.us EXECUTE 7.0 fetch - 1\n"
    jobstate = parse_jobstate(lines.encode())
    records = fold(index, snapshot, jobstate, {"fetch.us": _running(7)}, dagman_alive=True)
    assert records["fetch.us"].state == "running"
