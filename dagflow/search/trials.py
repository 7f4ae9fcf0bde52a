"""What a trial is: a point of the search space turned into a Plan, and the objective read back.

Two kinds of search share the scheduler through `TrialSource`:

- PipelineTrials: a pipeline's `search:` block. A trial is the whole pipeline expanded with the
  trial's params and its own run id `<search>-t<N>[-<region>]`; with `per: region` it is the sub-DAG
  of one region (every node on that region, and their ancestors). Nodes of steps that use none of the
  searched params keep the pipeline's own params, so the local engine's cache runs them once for
  all trials. The objective is the metric read from the metrics file of the step with `metrics:`,
  averaged over its nodes when the trial has several (other matrix axes). With `early_stopping:` the
  same files carry the trial's intermediate metrics, one JSON line per step (progress.py).
- SpearmintTrials: a Spearmint experiment directory. A trial is one job, `main(job_id, params)`,
  run as a one-node plan by `python -m dagflow.search.spearmint_job`; the objective is its result, and
  the experiment's CONSTRAINT tasks' values come back as the trial's outputs.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dagflow.bounded import BoundedInputError, decode_utf8, loads_json, read_bounded
from dagflow.errors import Diagnostic, SpecError
from dagflow.plan import Node, Plan, Resources, StepInfo
from dagflow.plan.expand import expand
from dagflow.run.resources.auto import AutoResources
from dagflow.search import OPTIMIZERS
from dagflow.search.checks import early_stopping_problems, metrics_clash, optimizer_key
from dagflow.search.progress import last_object
from dagflow.search.space import SearchSpace
from dagflow.search.spearmint import INSTEAD, SpearmintExperiment
from dagflow.search.spearmint_job import default_result_path, refusal
from dagflow.search.spearmint_records import output_path, write_records
from dagflow.search.store import Trial
from dagflow.spec import Spec
from dagflow.spec.model import EarlyStoppingSpec


class TrialError(Exception):
    """A finished trial whose objective cannot be read; the message says why."""


class TrialSource(Protocol):
    kind: str  # pipeline | spearmint
    name: str  # the default search name
    source: str  # what the search was started from (a pipeline file, a Spearmint directory)
    space: SearchSpace
    metric: str
    goal: str  # minimize | maximize
    regions: list[str]  # one search per entry; [""] when not per region
    budget: int
    parallel: int
    batch: bool  # synchronous batches: suggest `parallel` trials once every trial in flight has ended
    serial_tail: int  # the budget's last trials that run one at a time, each once every other has ended
    optimizer: str
    likelihood: str | None  # the objective's noise model as given: GAUSSIAN, NOISELESS or None
    constraints: dict[str, str | None]  # constraint output -> its likelihood as given; feasible where >= 0
    default_likelihood: str | None  # what None means (noise_models); None: the engine's own default
    counts_failures: bool  # whether a failed trial is spent of the budget
    early_stopping: EarlyStoppingSpec | None  # None: every trial runs to its end

    def plan(self, region: str, number: int, params: Mapping[str, Any], run_id: str) -> Plan: ...

    def objective(self, plan: Plan) -> float: ...

    def outputs(self, plan: Plan) -> dict[str, float] | None:
        """A succeeded trial's constraint values, by name (None without constraints)."""
        ...

    def failure(self, plan: Plan) -> str | None:
        """A failed trial's own error text, when the trial wrote one down (None: the run's reason says it)."""
        ...

    def unrunnable(self, plan: Plan) -> bool:
        """Whether the failed trial showed that no trial can succeed (a main file that does not compile)."""
        ...

    def notes(self) -> list[str]:
        """What to say once when the search starts (settings mapped or not used, the interpreter)."""
        ...

    def progress_files(self, plan: Plan) -> list[Path]:
        """The files a running trial appends its intermediate metrics to (progress.py)."""
        ...

    def observed(self, trials: Sequence[Trial], best: Callable[[], Trial | None]) -> None:
        """After a trial ended: keep what the source's own tools read of the search (Spearmint's files)."""
        ...


def fingerprint(source: TrialSource) -> str:
    """What a trial means; a search in the database continues only while this stays the same."""
    payload = {
        "kind": source.kind,
        "variables": {name: spec.model_dump() for name, spec in source.space.specs.items()},
        "metric": source.metric,
        "goal": source.goal,
        "regions": source.regions,
        "optimizer": source.optimizer,
    }
    if source.likelihood or source.constraints:  # absent before them: older searches keep their fingerprint
        payload.update(likelihood=source.likelihood, constraints=source.constraints)
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def noise_models(source: TrialSource) -> tuple[str | None, dict[str, str | None]]:
    """The likelihoods the optimiser models: the objective's and each constraint's, the source's default
    where none is given. Kept apart from the given ones, which are part of the fingerprint."""
    default = source.default_likelihood
    return source.likelihood or default, {name: given or default for name, given in source.constraints.items()}


def config_of(source: TrialSource) -> dict[str, Any]:
    """The search's description kept in the database for `search status`."""
    likelihood, _ = noise_models(source)
    return {
        "metric": source.metric,
        "goal": source.goal,
        "regions": source.regions,
        "optimizer": source.optimizer,
        "variables": source.space.names,
        # what `search status` needs to pick the best as the scheduler does (best.py: the GP's posterior)
        "space": {name: spec.model_dump(mode="json", exclude_none=True) for name, spec in source.space.specs.items()},
        **({"likelihood": likelihood} if likelihood else {}),
        **({"constraints": sorted(source.constraints)} if source.constraints else {}),
        **({"early_stopping": source.early_stopping.model_dump()} if source.early_stopping else {}),
    }


def read_metric(path: Path, metric: str) -> float:
    try:
        data = last_object(decode_utf8(read_bounded(path)))
    except FileNotFoundError:
        raise TrialError(f"metrics file {path} was not written") from None
    except OSError as error:
        raise TrialError(f"metrics file {path} cannot be read: {error.strerror}") from None
    except BoundedInputError as error:
        raise TrialError(f"metrics file {path} is {error}") from None
    if not isinstance(data, dict) or metric not in data:
        keys = sorted(data) if isinstance(data, dict) else []
        raise TrialError(f"metrics file {path} has no {metric!r} (keys: {', '.join(map(str, keys)) or 'none'})")
    value = data[metric]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TrialError(f"{metric} in {path} is {value!r}, not a finite number")
    return float(value)


@dataclass
class PipelineTrials:
    spec: Spec
    kind: str = "pipeline"
    name: str = ""
    source: str = ""
    regions: list[str] = field(default_factory=list)
    likelihood: str | None = None
    constraints: dict[str, str | None] = field(default_factory=dict)
    # dagflow's own near-noiseless default: a pipeline's objective is mostly a deterministic training run
    default_likelihood: str | None = None
    counts_failures: bool = True  # a failed training run took its compute

    def __post_init__(self) -> None:
        model = self.spec.model
        if model.search is None:
            raise self._error((), "this pipeline has no search: block (objective, variables, budget, ...)")
        self.search = model.search
        self.name = self.name or model.name
        self.source = str(self.spec.file.resolve())
        try:
            self.space = SearchSpace(self.search.variables)
        except ValueError as error:
            raise self._error(("search", "variables"), str(error)) from None
        if self.search.optimizer not in OPTIMIZERS:
            raise self._error(
                ("search", optimizer_key(self.spec)),
                f"unknown optimiser {self.search.optimizer!r}",
                allowed=", ".join(OPTIMIZERS),
            )
        self.metric = self.search.objective.metric
        self.goal = self.search.objective.goal
        self.budget = self.search.budget
        self.parallel = self.search.parallel
        self.batch = self.search.batch
        self.serial_tail = self.search.serial_tail
        self.optimizer = self.search.optimizer
        self.per = self.search.per
        self.regions = list(model.matrix[self.per]) if self.per else [""]
        self.early_stopping = self.search.early_stopping
        problems = early_stopping_problems(self.spec, str(self.spec.file))
        if problems:
            raise SpecError(problems)
        with_metrics = [name for name, step in model.steps.items() if step.metrics]
        if not with_metrics:
            raise self._error(
                ("search", "objective"),
                "no step has `metrics:`: the search reads its objective from the evaluate step's metrics file",
            )
        if len(with_metrics) > 1:
            raise self._error(
                ("search", "objective"),
                f"several steps write metrics ({', '.join(with_metrics)}); the objective must come from one",
            )
        self.objective_step = with_metrics[0]
        self._check_metrics_apart()

    def plan(self, region: str, number: int, params: Mapping[str, Any], run_id: str) -> Plan:
        plan = expand(self.spec, run_id=run_id, params=params, trial=number, resolve=AutoResources(self.spec).resolve)
        if self.early_stopping is not None:  # its metric lines are read while it runs: streamed where need be
            plan.progress_steps = [self.objective_step]
        if not self.per:
            return plan
        keep: set[str] = set()
        stack = [name for name, node in plan.nodes.items() if node.coords.get(self.per) == region]
        while stack:
            name = stack.pop()
            if name not in keep:
                keep.add(name)
                stack.extend(plan.nodes[name].parents)
        plan.nodes = {name: node for name, node in plan.nodes.items() if name in keep}
        used = {node.step for node in plan.nodes.values()}
        plan.steps = {name: info for name, info in plan.steps.items() if name in used}
        return plan

    def objective(self, plan: Plan) -> float:
        paths = self._metrics_paths(plan)
        if not paths:
            raise TrialError(f"the trial has no {self.objective_step} node")
        values = [read_metric(Path(plan.workdir) / path, self.metric) for path in paths]
        return sum(values) / len(values)

    def outputs(self, plan: Plan) -> dict[str, float] | None:
        return None

    def failure(self, plan: Plan) -> str | None:
        return None

    def unrunnable(self, plan: Plan) -> bool:
        return False

    def notes(self) -> list[str]:
        return []

    def observed(self, trials: Sequence[Trial], best: Callable[[], Trial | None]) -> None:
        return None  # a pipeline's search is read with `dagflow search status` and `dagflow report`

    def progress_files(self, plan: Plan) -> list[Path]:
        return [Path(plan.workdir) / path for path in self._metrics_paths(plan)]

    def _check_metrics_apart(self) -> None:
        """The check lives with the pipeline's validation, so `dagflow validate` makes it too."""
        clash = metrics_clash(self.spec, str(self.spec.file), self.name)
        if clash is not None:
            raise SpecError([clash])

    def _metrics_paths(self, plan: Plan) -> list[str]:
        return [node.metrics for node in plan.nodes.values() if node.step == self.objective_step and node.metrics]

    def _error(
        self, path: tuple[str, ...], message: str, hint: str | None = None, allowed: str | None = None
    ) -> SpecError:
        line, column = self.spec.positions.of(path) if path else (1, 1)
        return SpecError([Diagnostic(str(self.spec.file), line, column, ".".join(path), message, allowed, hint)])


JOB_STEP = "job"


@dataclass
class SpearmintTrials:
    """A Spearmint experiment: each trial is one job, `main(job_id, params)` with job_id the trial number."""

    experiment: SpearmintExperiment
    budget: int
    parallel: int
    optimizer: str = "gp"
    batch: bool = False
    serial_tail: int = 0
    kind: str = "spearmint"
    name: str = ""
    source: str = ""
    metric: str = "value"  # the result file's field (spearmint_job.py)
    goal: str = "minimize"  # Spearmint minimises
    regions: list[str] = field(default_factory=lambda: [""])
    python: str | None = None  # the interpreter that runs main (--python); None: dagflow's own
    # Spearmint's default for a task without `likelihood` (HIPS gp.py; JasperSnoek's noiseless=0)
    default_likelihood: str | None = "GAUSSIAN"
    # HIPS's remove_broken_jobs: a broken job is dropped and max-finished-jobs counts completed ones
    counts_failures: bool = False

    def __post_init__(self) -> None:
        self.early_stopping: EarlyStoppingSpec | None = None  # a Spearmint job reports no intermediate metrics
        self.likelihood = self.experiment.likelihood
        self.constraints = dict(self.experiment.constraints)
        self.name = self.name or self.experiment.name
        self.source = str(self.experiment.directory)
        config = str(self.experiment.config_file)
        try:
            self.space = self.experiment.space()
        except ValueError as error:
            raise SpecError([Diagnostic(config, 0, 0, "variables", str(error))]) from None
        if self.experiment.language != "PYTHON":
            raise SpecError([Diagnostic(config, 0, 0, "language", refusal(self.experiment.language))])
        if self.optimizer not in OPTIMIZERS:
            message = f"unknown optimiser {self.optimizer!r}"
            raise SpecError([Diagnostic(config, 0, 0, "", message, ", ".join(OPTIMIZERS))])

    def plan(self, region: str, number: int, params: Mapping[str, Any], run_id: str) -> Plan:
        result = default_result_path(self.experiment, number)
        argv = [
            "python", "-m", "dagflow.search.spearmint_job", "--dir", str(self.experiment.directory),
            "--job-id", str(number), "--params", json.dumps(dict(params), sort_keys=True), "--result", str(result),
            *(["--python", self.python] if self.python else []),
        ]  # fmt: skip
        step = StepInfo(
            name=JOB_STEP, kind="evaluate", axes=(), resources=Resources(),
            retries=0, retry_unless_exit=(), timeout_s=None, priority=0, metrics=str(result),
        )  # fmt: skip
        node = Node(
            name=JOB_STEP, step=JOB_STEP, argv=argv, env={}, coords={}, trial=number, params=dict(params),
            outputs=[str(result), str(output_path(self.experiment.directory, number))], metrics=str(result),
        )  # fmt: skip
        return Plan(
            pipeline=self.name,
            run_id=run_id,
            source=str(self.experiment.config_file),
            steps={JOB_STEP: step},
            nodes={JOB_STEP: node},
            workdir=str(self.experiment.directory),
        )

    def objective(self, plan: Plan) -> float:
        """The job's objective; NaN for a job that completed with a NaN objective, HIPS Spearmint's infeasible
        point (spearmint_job.py), which the scheduler records as a completed, infeasible trial."""
        node = plan.nodes[JOB_STEP]
        assert node.metrics is not None
        if self._infeasible(plan):
            return math.nan
        return read_metric(Path(node.metrics), self.metric)

    def outputs(self, plan: Plan) -> dict[str, float] | None:
        if not self.constraints:
            return None
        values = self._result(plan).get("values")
        if self._infeasible(plan):  # a NaN objective's constraint values: those that are numbers, if any
            known = values if isinstance(values, dict) else {}
            kept = {n: float(known[n]) for n in self.constraints if _is_number(known.get(n))}
            return kept or None
        if not isinstance(values, dict) or any(not isinstance(values.get(c), int | float) for c in self.constraints):
            where = plan.nodes[JOB_STEP].metrics
            raise TrialError(f"result {where} lacks the constraint values {', '.join(sorted(self.constraints))}")
        return {name: float(values[name]) for name in self.constraints}

    def progress_files(self, plan: Plan) -> list[Path]:
        return []

    def failure(self, plan: Plan) -> str | None:
        error = self._result(plan).get("error")
        return error if isinstance(error, str) and error else None

    def unrunnable(self, plan: Plan) -> bool:
        return self._result(plan).get("fatal") is True

    def observed(self, trials: Sequence[Trial], best: Callable[[], Trial | None]) -> None:
        write_records(self.experiment.directory, trials, best())

    def notes(self) -> list[str]:
        notes = [f"main file run by {self.python}"] if self.python else []
        ignored = self.experiment.ignored
        if ignored:
            shown = [f"{key} ({INSTEAD[key]})" if key in INSTEAD else key for key in ignored]
            notes.append(f"{self.experiment.config_file.name}: not used by dagflow: {'; '.join(shown)}")
        return notes

    def _infeasible(self, plan: Plan) -> bool:
        result = self._result(plan)
        return result.get("status") == "complete" and result.get("infeasible") is True

    @staticmethod
    def _result(plan: Plan) -> dict[str, Any]:
        path = plan.nodes[JOB_STEP].metrics
        try:
            data = loads_json(read_bounded(path or ""))
        except (OSError, BoundedInputError):
            return {}
        return data if isinstance(data, dict) else {}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
