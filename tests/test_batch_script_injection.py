"""Every value that reaches a Slurm or Grid Engine job script does only what dagflow wrote (issue #26 item 3).

A job script is read three ways: by bash, by sbatch (`#SBATCH`, `#PBS`, `#BSUB` lines before the first
command) and by qsub (`#$` lines anywhere in the file). So no value may start a line of its own: a
newline in a comment line ran the rest as shell, and a newline inside a quoted argument let qsub read
the next line as a directive. The property test builds both engines' scripts from hostile values (the
run and pipeline directories, the interpreter's path, run id, step and node names, argv, env,
matrix values, ClassAds, runtime.python, --sge-pe) and runs them with bash against a recorder standing in
for the node wrapper; a few fixed examples go through the real sbatch and qsub, and the command line.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dagflow.engines.batch.records import JobRecord
from dagflow.engines.batch.script import JobScriptError, shell_word
from dagflow.engines.batch.units import plan_units
from dagflow.engines.sge import commands as sge_commands
from dagflow.engines.sge.submit import Submission as SgeSubmission
from dagflow.engines.sge.submit import sge_units
from dagflow.engines.slurm import commands as slurm_commands
from dagflow.engines.slurm.submit import Submission as SlurmSubmission
from dagflow.errors import EXIT_USAGE, DagflowError
from dagflow.plan import Node, Plan, Resources, StepInfo
from dagflow.plan.model import Runtime
from dagflow.text import CONTROL_CHARACTERS

CANARY = "INJECTED"  # what an injected `touch` creates; relative, so it can sit in a directory name
PAYLOADS = (
    f"\ntouch {CANARY}\n", f"\r\ntouch {CANARY}", f"$(touch {CANARY})", f"`touch {CANARY}`", f"'; touch {CANARY}; '",
    f'"; touch {CANARY}; "', f"\n#SBATCH --wrap='touch {CANARY}'\n", f"\n#$ -v BASH_ENV={CANARY}\n", "\n#PBS -N x\n",
    f"\u2028touch {CANARY}", "\\", "%j", "$JOB_ID", "\x85", "\x1b[2J", "\udcff", "é€😀", "a" * 150, "--", "-",
)  # fmt: skip
ALPHABET = "\n\r\t\x01\x7f'\"$`;&|\\ %:,#!(){}[]*?~=-é"

text = st.lists(st.one_of(st.sampled_from(PAYLOADS), st.text(ALPHABET, max_size=6)), max_size=4).map("".join)
# NUL, which nothing can carry, has a test of its own. Directory names: any text (short enough for the file
# system), often refused as a path by sbatch or qsub; and twice as often text without what they refuse, so
# that most examples reach the scripts.
hostile_name = text.map(lambda value: value[:60])
CARRIED_IN_PATHS = (f"`touch {CANARY}`", f"'; touch {CANARY}; '", f'"; touch {CANARY}; "', "%j", "\udcff", "é€😀", " #")
carried_name = st.lists(
    st.one_of(st.sampled_from(CARRIED_IN_PATHS), st.text("'\"`;&|%#!(){}[]*?~=- é", max_size=6)), min_size=1, max_size=4
).map("".join)
component = st.one_of(carried_name, carried_name, hostile_name).filter(lambda value: value not in ("", ".", ".."))


@dataclass(frozen=True, slots=True)
class Values:
    """Everything a pipeline, a plan.json or the command line can put into a job script."""

    run_dir: str  # the directory names are one path component each
    workdir: str
    interpreter_dir: str
    run_id: str
    step: str
    node: str
    argv: tuple[str, ...]
    env_name: str
    env_value: str
    coord: str
    classad: str
    python: str
    pe: str


values_strategy = st.builds(
    Values, run_dir=component, workdir=component, interpreter_dir=component, run_id=text, step=text, node=text,
    argv=st.lists(text, max_size=3).map(tuple), env_name=text, env_value=text, coord=text, classad=text,
    python=text, pe=text,
)  # fmt: skip


def hostile_plan(values: Values, workdir: Path) -> Plan:
    """Two nodes of one step (an array) and a node of a second step after both (a single job)."""

    def step(name: str) -> StepInfo:
        return StepInfo(
            name=name, kind="command", axes=(), resources=Resources(cpus=2),
            engine_fields={"condor": {"classads": {"Note": values.classad}}}, retries=0, retry_unless_exit=(),
            timeout_s=None, priority=0,
            metrics=None, runtime=Runtime(python=values.python or None),
        )  # fmt: skip

    first, second = values.step, values.step + "-gather"
    argv = ["python", *values.argv]
    env = {values.env_name: values.env_value}
    names = [f"{values.node}.a", f"{values.node}.b"]
    nodes = {name: Node(name, first, argv, env, {"axis": values.coord}) for name in names}
    gather = f"{values.node}.gather"
    nodes[gather] = Node(gather, second, argv, env, {}, parents=names)
    steps = {first: step(first), second: step(second)}
    return Plan("hostile", values.run_id, "pipeline.yaml", steps, nodes, workdir=str(workdir))


@dataclass(frozen=True, slots=True)
class Engine:
    """How the test drives one engine's submission and plays its scheduler for bash."""

    name: str
    submit: Callable[[Plan, Path, str], list[JobRecord]]  # plan, run dir, --sge-pe
    client: tuple[object, str]  # the commands module and its submit function
    directives: Callable[[list[str]], list[str]]  # the script lines the scheduler reads as directives

    def job_env(self, job: str, task: int) -> dict[str, str]:
        task_variable = "SLURM_ARRAY_TASK_ID" if self.name == "slurm" else "SGE_TASK_ID"
        job_variable = "SLURM_JOB_ID" if self.name == "slurm" else "JOB_ID"
        return {job_variable: job, task_variable: str(task)}

    def job_ref(self, job: str, task: int) -> str:
        return job if self.name == "slurm" or task == -1 else f"{job}.{task}"


def _sbatch_directives(lines: list[str]) -> list[str]:
    """sbatch reads #SBATCH (and #PBS, #BSUB) lines until the first line that is not a comment."""
    found = []
    for line in lines[1:]:
        if line.strip() and not line.startswith("#"):
            break
        if line.startswith(("#SBATCH", "#PBS", "#BSUB")):
            found.append(line)
    return found


def _qsub_directives(lines: list[str]) -> list[str]:
    """qsub reads every line that starts with `#$`, also after the first command (measured here)."""
    return [line for line in lines if line.startswith("#$")]


def _submit_slurm(plan: Plan, run_dir: Path, pe: str) -> list[JobRecord]:
    return SlurmSubmission(plan, run_dir, 1).run(plan_units(plan, list(plan.nodes), 1000))


def _submit_sge(plan: Plan, run_dir: Path, pe: str) -> list[JobRecord]:
    return SgeSubmission(plan, run_dir, 1, pe).run(sge_units(plan, list(plan.nodes), 1000))


SLURM = Engine("slurm", _submit_slurm, (slurm_commands, "sbatch"), _sbatch_directives)
SGE = Engine("sge", _submit_sge, (sge_commands, "qsub"), _qsub_directives)


def write_recorder(directory: Path, record: Path) -> Path:
    """A stand-in for the interpreter the script execs: it writes the run's variables and its argv."""
    directory.mkdir(parents=True, exist_ok=True)
    recorder = directory / "python"
    recorder.write_text(
        "#!/bin/bash\n"
        f'printf "%s\\0" "$DAGFLOW_RUN_ID" "$DAGFLOW_RUN_DIR" "$@" > "$(mktemp {shlex.quote(str(record))}.XXXXXX)"\n'
    )
    recorder.chmod(0o755)
    return recorder


def read_records(record: Path) -> list[list[str]]:
    return [path.read_bytes().decode("utf-8", "surrogateescape").split("\0")[:-1]
            for path in sorted(record.parent.glob(record.name + ".*"))]  # fmt: skip


def follows(words: list[str], flag: str, value: str) -> bool:
    return any(words[i] == flag and words[i + 1] == value for i in range(len(words) - 1))


def check_record(words: list[str], plan: Plan, run_dir: Path, node: str, job_ref: str | None) -> None:
    """The recorder was exec'd with exactly the values of the plan: dagflow's command and nothing else."""
    run_id, env_run_dir, *argv = words
    assert (run_id, env_run_dir) == (plan.run_id, str(run_dir))
    assert argv[:2] == ["-m", "dagflow.engines.batch.node"]
    step = plan.steps[plan.nodes[node].step]
    expected = step.runtime.argv(list(plan.nodes[node].argv))
    assert argv[len(argv) - len(expected) - 1 :] == ["--", *expected]
    assert follows(argv, "--node", node) and follows(argv, "--step", step.name)
    assert job_ref is None or follows(argv, "--job", job_ref)
    assert follows(argv, "--workdir", str(Path(plan.workdir).absolute()))
    assert follows(argv, "--journal", str(run_dir / "journal.jsonl"))
    for name, value in plan.nodes[node].env.items():
        assert follows(argv, "--env", f"{name}={value}")


def check_script(engine: Engine, script: str, tasks: dict[int, str]) -> None:
    """One line per line dagflow writes, none of them a directive, and bash parses it."""
    assert not CONTROL_CHARACTERS.search(script.replace("\n", "")), "a raw control character in the script"
    lines = script.split("\n")  # bash's lines: only \n ends one
    body = 1 if list(tasks) == [-1] else len(tasks) + 3  # the exec, or case/tasks/default/esac
    assert len(lines) == 3 + 4 + body + 1, script  # header, exports, body, the final newline
    assert lines[1].startswith("# dagflow run ") and lines[2].startswith(("#   sbatch ", "#   qsub "))
    assert engine.directives(lines) == []
    parsed = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False,
                            errors="surrogateescape")  # fmt: skip
    assert parsed.returncode == 0 and parsed.stderr == "", parsed.stderr


def run_scripts(engine: Engine, values: Values, scratch: Path) -> int:
    """Submit the hostile plan to a stand-in scheduler and run every script written; how many (0: refused)."""
    workdir = scratch / values.workdir
    run_dir = scratch / "runs" / values.run_dir
    record = scratch / "record"
    cwd = scratch / "cwd"
    for directory in (workdir, run_dir / engine.name / "scripts", cwd):
        directory.mkdir(parents=True, exist_ok=True)
    recorder = write_recorder(scratch / values.interpreter_dir, record)
    plan = hostile_plan(values, workdir)
    submitted: dict[str, str] = {}

    def fake_submit(options: list[str], path: str) -> str:
        submitted[str(7 + len(submitted))] = path
        return str(6 + len(submitted))

    module, function = engine.client
    with mock.patch.object(sys, "executable", str(recorder)), mock.patch.object(module, function, fake_submit):
        try:
            jobs = engine.submit(plan, run_dir, values.pe)
        except DagflowError as error:  # refused: a clear one-line message, and nothing submitted
            assert error.exit_code == EXIT_USAGE and not CONTROL_CHARACTERS.search(str(error)), str(error)
            assert submitted == {}
            return 0
    for job in jobs:
        script = Path(submitted[job.job]).read_text(errors="surrogateescape")
        check_script(engine, script, job.tasks)
        for task, node in job.tasks.items():
            env = {"PATH": os.environ["PATH"], **engine.job_env(job.job, task)}
            ran = subprocess.run(["bash", submitted[job.job]], cwd=cwd, env=env, capture_output=True, text=True,
                                 check=False, timeout=60)  # fmt: skip
            assert ran.returncode == 0 and ran.stderr == "", ran.stderr
            (words,) = read_records(record)
            check_record(words, plan, run_dir, node, engine.job_ref(job.job, task))
            for path in record.parent.glob(record.name + ".*"):
                path.unlink()
    assert not list(scratch.rglob(CANARY)), "an injected command ran"
    return len(jobs)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(values=values_strategy)
def test_hostile_values_in_job_scripts_do_only_what_dagflow_wrote(values: Values) -> None:
    for engine in (SLURM, SGE):
        with tempfile.TemporaryDirectory() as scratch:
            event(f"{engine.name}: {'refused' if run_scripts(engine, values, Path(scratch)) == 0 else 'ran'}")


# Values no directory name can hold but a plan.json can: they must be carried, not refused.
CARRIED = Values(
    run_dir="run 'q' é", workdir='w "d" ; &', interpreter_dir="bin `x` é",
    run_id="r-1", step="train", node=f"n$(touch {CANARY})",
    argv=("-c", f"line\n#SBATCH --wrap='touch {CANARY}'\n#$ -v BASH_ENV=/x\n\r$(touch {CANARY})", "it's", "\x1b\u2028"),
    env_name="EXTRA", env_value=f"v\n#$ -N evil\n`touch {CANARY}`", coord="us\n#$ -o /x", classad="c\n#PBS -N x",
    python="python3", pe="smp",
)  # fmt: skip


@pytest.mark.parametrize("engine", [SLURM, SGE], ids=["slurm", "sge"])
def test_values_with_line_breaks_inside_the_plan_are_carried_not_refused(engine: Engine, tmp_path: Path) -> None:
    assert run_scripts(engine, CARRIED, tmp_path) == 2  # both units written and run, nothing refused


@pytest.mark.parametrize("engine", [SLURM, SGE], ids=["slurm", "sge"])
def test_a_nul_character_is_refused_naming_the_value(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(JobScriptError) as caught:
        shell_word("a\x00b")
    assert caught.value.exit_code == EXIT_USAGE and "'a\\x00b' contains a NUL character" in str(caught.value)
    assert run_scripts(engine, dataclasses.replace(CARRIED, argv=("a\x00b",)), tmp_path) == 0


# --- the real schedulers ------------------------------------------------------------------------------------

WAIT_S = 180  # a backstop for a loaded machine; a job here takes about a second


def cluster_values(engine: Engine, scratch: Path) -> Values:
    """CARRIED, with what each scheduler takes in a path, and an injected BASH_ENV that would touch a file."""
    evil = scratch / "evil.sh"
    evil.write_text(f"touch {shlex.quote(str(scratch / CANARY))}\n")
    run_dir = "run 'q' $(touch INJECTED) %j é" if engine is SLURM else "run 'q' `touch INJECTED` ; é"
    return dataclasses.replace(
        CARRIED, run_dir=run_dir, step=f"train\ntouch {CANARY}", node=f"n$(touch {CANARY})'q",
        argv=(*CARRIED.argv, f"x\n#$ -v BASH_ENV={evil}\n#SBATCH --export=BASH_ENV={evil}\n"),
    )  # fmt: skip


def wait_for(engine: Engine, record: Path, jobs: list[str], count: int) -> list[list[str]]:
    module = slurm_commands if engine is SLURM else sge_commands
    deadline = time.monotonic() + WAIT_S
    while len(read_records(record)) < count or {job.job_id for job in module.queued_jobs()} & set(jobs):
        assert time.monotonic() < deadline, f"jobs {jobs} not done after {WAIT_S} s: {read_records(record)}"
        time.sleep(0.5)
    return read_records(record)


def run_on_cluster(engine: Engine, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Submit CARRIED-like values for real; each job runs the recorder with exactly dagflow's values."""
    values = cluster_values(engine, scratch)
    workdir, run_dir, record = scratch / values.workdir, scratch / "runs" / values.run_dir, scratch / "record"
    for directory in (workdir, run_dir / engine.name / "scripts"):
        directory.mkdir(parents=True)
    plan = hostile_plan(values, workdir)
    monkeypatch.setattr(sys, "executable", str(write_recorder(scratch / values.interpreter_dir, record)))
    monkeypatch.chdir(scratch)  # sbatch's jobs start where sbatch ran
    jobs = engine.submit(plan, run_dir, values.pe)
    records = wait_for(engine, record, [job.job for job in jobs], len(plan.nodes))
    by_node = {words[words.index("--node") + 1]: words for words in records}
    assert sorted(by_node) == sorted(plan.nodes)
    for job in jobs:
        for task, node in job.tasks.items():
            job_ref = None if engine is SLURM else engine.job_ref(job.job, task)  # Slurm: each task's own id
            check_record(by_node[node], plan, run_dir, node, job_ref)
    assert (run_dir / engine.name / "wrapper.log").is_file()  # where dagflow said, not expanded
    assert not list(scratch.rglob(CANARY)), "an injected command ran"


@pytest.mark.usefixtures("slurm_cluster")
def test_hostile_values_run_as_written_on_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_on_cluster(SLURM, tmp_path, monkeypatch)


@pytest.mark.usefixtures("sge_cluster")
def test_hostile_values_run_as_written_on_grid_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_on_cluster(SGE, tmp_path, monkeypatch)


PIPELINE = """\
name: hostile
steps:
  a: {command: [sh, -c, "true"], resources: {cpus: 2}}
"""


def dagflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=cwd, capture_output=True, text=True,
                          check=False, timeout=600)  # fmt: skip


@pytest.mark.parametrize("engine", ["slurm", "sge"])
@pytest.mark.slow
def test_a_newline_in_the_pipeline_directory_is_refused_before_any_job(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue(f"{engine}_cluster")
    project = tmp_path / f"proj\ntouch {CANARY}\n#"
    project.mkdir()
    (project / "pipeline.yaml").write_text(PIPELINE)
    result = dagflow("run", "--engine", engine, "pipeline.yaml", cwd=project)
    assert not list(tmp_path.rglob(CANARY)), "the directory's name ran as shell in the job"
    assert result.returncode == 2, result.stdout + result.stderr
    assert "'\\n' (position" in result.stderr and "Traceback" not in result.stderr, result.stderr


@pytest.mark.usefixtures("sge_cluster")
def test_a_bad_sge_pe_is_refused_before_the_run_exists(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    result = dagflow("run", "--engine", "sge", "--sge-pe", f"smp\ntouch {CANARY}", "pipeline.yaml", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--sge-pe 'smp\\ntouch INJECTED' is not a parallel environment name" in result.stderr
    assert not (tmp_path / ".dagflow").exists()
