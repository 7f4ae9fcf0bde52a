"""Search early stopping on the real one-machine HTCondor pool (tests/condor_pool.py), in the transfer data
mode, when a trial's job is evicted (`condor_vacate_job`) after it streamed a few epochs and runs again
from the start: its metric lines reach the scheduler only on the job's stderr, marked by the node wrapper
and streamed by `stream_error` (engines/condor/progress.py, run/progress_stream.py).

What HTCondor does to the streamed file on the access point at the restart (measured on this pool,
HTCondor 25.14: a job streaming a line a second, vacated after 5 lines): the file keeps the first run's
lines while the job waits to run again, then the new run's starter truncates it, so it holds only the new
run's lines. condor_submit's manual says only that with `stream_error = true` "stderr is streamed back to
the machine from which the job was submitted"; the starter opens a streamed output file with O_TRUNC at
each start (src/condor_starter.V6.1/user_proc.h, UserProc::streamingOpenFlags), and with O_APPEND only for
a job that checkpoints (vanilla_proc.cpp: WantCheckpointSignal, WantFTOnCheckpoint or DontAppend = false;
measured too: with `checkpoint_exit_code` the second run's lines follow the first's), which these trials
do not. The reader (search/progress.py) forgets a file that shrank or whose first line changed (node.sh's
start line names each start), and drops the curve at a start line met further on (the append case).

Four trials run side by side, one per `role` (an ENUM, so the random optimiser draws each once):

- evicted-good: its first run pauses after epoch 3 (train.py sleeps, so the vacate races nothing) and is
  vacated; its second run completes every epoch. It must succeed with its final value, the best one.
- good: runs to its end undisturbed.
- hopeless: loss 5 + 1/epoch; stopped while it runs (it waits after epoch 5 until it is).
- evicted-hopeless: its first run reports the good curve (1/epoch) up to epoch 6 and pauses there; it is
  vacated, and its second run reports 5 + 1/epoch. It must be stopped during the second run, judged on the
  second run's values alone: had its curve kept the first run's steps, their good values would shield it
  (the median rule compares its best so far) until its second run passed step 6.

The jobs append their role to starts.log in the test's directory at each start (instrumentation, as in
test_checkpoint_condor_pool.py: the pool is one machine), so the test knows each evicted job ran twice.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from condor_pool import Pool
from test_condor_paths_pool import remove_jobs_under
from test_search_scheduler_support import trial_rows

from dagflow.run.progress_stream import STREAM_MARKER, STREAM_START

pytestmark = pytest.mark.condor_pool

EPOCHS = 8
EPOCH_S = 2
PAUSE_AT = {"evicted-good": 3, "evicted-hopeless": 6}  # the epoch a first run waits after, to be vacated
# A hopeless run (loss 5 + 1/epoch) waits after this epoch until it is stopped: on a loaded machine the
# scheduler's stop could otherwise come after its last epoch (it once did in CI), and a run that is never
# stopped then fails the test instead of passing by luck.
HOPELESS_WAITS_AT = PAUSE_AT["evicted-hopeless"] - 1
ROLES = ["evicted-good", "good", "hopeless", "evicted-hopeless"]  # the final value's rank, best first

TRAIN = f"""\
import argparse, json, os, time
parser = argparse.ArgumentParser()
parser.add_argument("--role")
parser.add_argument("--out")
args = parser.parse_args()
fd = os.open(os.environ["STARTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, (args.role + "\\n").encode())
os.close(fd)
with open(os.environ["STARTS"]) as handle:
    first = handle.read().split().count(args.role) == 1
pause = {PAUSE_AT!r}.get(args.role) if first else None
base = 5.0 if args.role.endswith("hopeless") and not (first and args.role == "evicted-hopeless") else 0.0
os.makedirs(os.path.dirname(args.out), exist_ok=True)
for epoch in range(1, {EPOCHS} + 1):
    time.sleep({EPOCH_S})
    fd = os.open(args.out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (json.dumps({{"step": epoch, "loss": base + 1.0 / epoch}}) + "\\n").encode())
    os.close(fd)
    if epoch == pause:
        time.sleep(600)  # the test vacates the job here
    if base and epoch == {HOPELESS_WAITS_AT}:
        time.sleep(600)  # only the early stop ends it
with open(args.out, "a") as handle:
    handle.write(json.dumps({{"loss": base + 1.0 / {EPOCHS} + 0.01 * {ROLES!r}.index(args.role)}}) + "\\n")
"""

PIPELINE = """\
name: evicted
params: {{role: good}}
condor: {{data_mode: transfer}}
steps:
  train:
    kind: train
    command: python train.py --role {{params.role}} --out out/{{run.id}}/metrics.jsonl
    env: {{STARTS: {starts}}}
    metrics: out/{{run.id}}/metrics.jsonl
search:
  objective: {{metric: loss, goal: minimize}}
  variables:
    role: {{type: ENUM, options: [{roles}]}}
  budget: 4
  parallel: 4
  optimizer: random
  early_stopping: {{rule: median, min_steps: 2, min_trials: 2}}
"""


def _marked(err: Path) -> tuple[int, list[dict[str, float]]]:
    """The start lines and the progress points a node's streamed stderr holds now."""
    lines = err.read_bytes().splitlines() if err.exists() else []
    starts = sum(line.startswith(STREAM_START) for line in lines)
    return starts, [json.loads(line[len(STREAM_MARKER) :]) for line in lines if line.startswith(STREAM_MARKER)]


def _err(work: Path, run_id: str) -> Path:
    return work / ".dagflow" / "runs" / run_id / "logs" / "train.err"


def _run_of(work: Path, role: str) -> str | None:
    rows = [row for row in trial_rows(work / ".dagflow" / "search.db") if row["params"]["role"] == role]  # type: ignore[index]
    return str(rows[0]["run_id"]) if rows and rows[0]["run_id"] else None


def _vacate_when_paused(pool: Pool, work: Path, role: str) -> str:
    """Wait until the role's first run has streamed its epochs up to its pause, then vacate its job."""
    run_id = str(pool.wait_until(lambda: _run_of(work, role), f"the {role} trial's run"))
    pool.wait_until(lambda: len(_marked(_err(work, run_id))[1]) >= PAUSE_AT[role], f"{role}'s first epochs")
    constraint = f'DagflowRunId == "{run_id}" && DagflowStep == "train" && JobStatus == 2'
    pool.run(["condor_vacate_job", "-constraint", constraint])
    events = work / ".dagflow" / "runs" / run_id / "condor" / "dagflow.jobs.log"
    pool.wait_until(lambda: re.search(r"^004 .*Job was evicted", events.read_text(), re.MULTILINE), f"{role} evicted")
    return run_id


def test_an_evicted_trial_restarts_its_streamed_curve_and_is_judged_on_the_new_run(condor_pool: Pool) -> None:
    pool = condor_pool
    work = pool.workdir("early-stopping-evict")
    starts = work / "starts.log"
    (work / "pipeline.yaml").write_text(PIPELINE.format(starts=starts, roles=", ".join(ROLES)))
    (work / "train.py").write_text(TRAIN)
    pool.give(work)
    args = ["search", "run", "pipeline.yaml", "--engine", "condor", "--seed", "1", "--poll", "1"]
    with ThreadPoolExecutor(1) as background:
        search = background.submit(pool.dagflow, [*args, "--start-grace", "10m"], cwd=work, timeout=600, check=False)
        try:
            for role in PAUSE_AT:
                _vacate_when_paused(pool, work, role)
            done = search.result()
        finally:
            remove_jobs_under(pool, work)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    rows = {str(row["params"]["role"]): row for row in trial_rows(work / ".dagflow" / "search.db")}  # type: ignore[index]
    assert sorted(rows) == sorted(ROLES), rows
    assert sorted(starts.read_text().split()) == sorted([*ROLES, *PAUSE_AT]), starts.read_text()  # evicted: 2 starts
    states = {role: row["state"] for role, row in rows.items()}
    assert states == {"evicted-good": "succeeded", "good": "succeeded", "hopeless": "stopped",
                      "evicted-hopeless": "stopped"}, (rows, out)  # fmt: skip

    # the evicted good trial ran all its epochs again and counts with its final value, the best one
    good = rows["evicted-good"]
    assert good["step"] is None and good["value"] == pytest.approx(1.0 / EPOCHS), (good, out)
    lines = (work / "out" / str(good["run_id"]) / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines[:-1]] == list(range(1, EPOCHS + 1)), lines  # its 2nd run
    # its streamed stderr holds the second run alone (its curve, then its result): truncated at the restart
    curve = [{"step": s, "loss": 1.0 / s} for s in range(1, EPOCHS + 1)]
    assert _marked(_err(work, str(good["run_id"]))) == (1, [*curve, {"loss": 1.0 / EPOCHS}])
    assert f"best loss={1.0 / EPOCHS:.6g} at t{good['number']}" in out, out

    # both hopeless trials were stopped while their job ran, on values of the run that was running
    for role in ("hopeless", "evicted-hopeless"):
        row = rows[role]
        step = int(row["step"])  # type: ignore[call-overload]
        assert 2 <= step < EPOCHS, (row, out)
        assert not (work / "out" / str(row["run_id"]) / "metrics.jsonl").exists(), row  # its job never ended
        assert row["value"] == pytest.approx(5.0 + 1.0 / step), (row, out)
        assert f"best so far {5.0 + 1.0 / step:.6g} is worse" in str(row["error"]), row
        count, points = _marked(_err(work, str(row["run_id"])))
        assert count == 1 and points[:step] == [{"step": s, "loss": 5.0 + 1.0 / s} for s in range(1, step + 1)], points
    # the first run's steps 1-6 (loss 1/step, as good as any) are no part of the curve it was judged on
    assert int(rows["evicted-hopeless"]["step"]) < PAUSE_AT["evicted-hopeless"], (rows["evicted-hopeless"], out)  # type: ignore[call-overload]
    assert out.count("] stopped at step ") == 2, out

    # `dagflow search status` tells the same
    status = json.loads(pool.dagflow(["search", "status", "--json", "--no-plot"], cwd=work).stdout)
    shown = {trial["params"]["role"]: trial for trial in status["trials"]}
    fields = ("state", "step", "value")
    for role, row in rows.items():
        assert [shown[role][key] for key in fields] == [row[key] for key in fields], (shown[role], row)
    assert status["regions"][""]["best"]["trial"] == good["number"], status["regions"]
    assert status["regions"][""]["best"]["value"] == pytest.approx(1.0 / EPOCHS)
