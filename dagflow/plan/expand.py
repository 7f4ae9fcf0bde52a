"""expand(): Spec -> Plan. Fans steps out over the matrix and wires each node to its parents.

A node of step A depends on every node of a needed step B whose coordinates agree with its own on
the axes both steps share. That one rule covers fan-out (train.us needs fetch.us), gathering (a
report over regions needs every evaluate node) and fanning out again after a gather.
"""

from __future__ import annotations

import itertools
import secrets
import shlex
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from graphlib import TopologicalSorter
from operator import itemgetter
from typing import Any

from dagflow.errors import Diagnostic, SpecError
from dagflow.gc_pause import gc_paused
from dagflow.plan.model import (
    DAGFLOW_LAUNCHER,
    PROMOTE_SUFFIX,
    PUBLISH_SUFFIX,
    Node,
    Plan,
    Resources,
    Runtime,
    StepInfo,
)
from dagflow.policies import GpuClass, gpu_classes
from dagflow.resources.auto import AutoResources
from dagflow.resources.gpu_memory import GPU_MEMORY, GPU_MEMORY_MARK
from dagflow.spec.load import Spec
from dagflow.spec.model import AUTO, PipelineSpec, StepSpec
from dagflow.spec.templates import Template, parse_template
from dagflow.spec.yamlpos import dotted


def new_run_id(pipeline: str) -> str:
    return f"{pipeline}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def param_text(value: object) -> str:
    """How a param value reads inside a template: YAML's spelling for booleans, repr-exact floats."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):  # a search variable of size > 1
        return ",".join(param_text(item) for item in value)
    return str(value)


def step_order(model: PipelineSpec) -> list[str]:
    """Steps in a topological order, ties broken by declaration order (validation refused cycles)."""
    declared = {name: index for index, name in enumerate(model.steps)}
    sorter = TopologicalSorter({name: step.needs for name, step in model.steps.items()})
    sorter.prepare()
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=declared.__getitem__)
        order.extend(ready)
        sorter.done(*ready)
    return order


def expand(
    spec: Spec, run_id: str | None = None, params: Mapping[str, Any] | None = None, trial: int | None = None
) -> Plan:
    """The plan of spec. `params` overrides the pipeline's params (a search trial's point) and `trial`
    marks every node with the trial number; nodes of steps that use none of the overridden params keep
    the pipeline's own params, so they fingerprint (and cache) exactly as in a plain run."""
    with gc_paused():
        return _expand(spec, run_id, params or {}, trial)


def _expand(spec: Spec, run_id: str | None, overrides: Mapping[str, Any], trial_number: int | None) -> Plan:
    expander = _Expander(spec, run_id or new_run_id(spec.model.name), overrides, trial_number)
    for step_name in step_order(spec.model):
        expander.add_step(step_name)
    return Plan(
        pipeline=spec.model.name,
        run_id=expander.run_id,
        source=str(spec.file),
        steps=expander.steps,
        nodes=expander.nodes,
        workdir=str(spec.file.parent),
        engine_defaults=_engine_defaults(spec.model),
    )


def _engine_defaults(model: PipelineSpec) -> dict[str, dict[str, Any]]:
    """The engine settings the pipeline declares (only those it sets: a flag or the engine's default rules
    the rest)."""
    if model.condor is None:
        return {}
    return {"condor": {key: getattr(model.condor, key) for key in model.condor.model_fields_set}}


class _Expander:
    """What one expansion builds up: the plan's steps and nodes, and each step's nodes for wiring."""

    def __init__(self, spec: Spec, run_id: str, overrides: Mapping[str, Any], trial_number: int | None) -> None:
        model = spec.model
        self.spec = spec
        self.run_id = run_id
        self.trial_number = trial_number
        self.base_context = {"run.id": run_id, "pipeline": model.name, GPU_MEMORY: GPU_MEMORY_MARK}
        self.auto = AutoResources(spec)  # `auto` resources, learned from the pipeline's past runs
        self.base_context.update({f"params.{name}": param_text(value) for name, value in model.params.items()})
        self.base_context.update({f"params.{name}": param_text(value) for name, value in overrides.items()})
        self.params = dict(model.params)
        self.trial_params = {**self.params, **overrides}
        self.overridden = {f"params.{name}" for name in overrides}
        self.steps: dict[str, StepInfo] = {}
        self.nodes: dict[str, Node] = {}
        self.by_step: dict[str, list[Node]] = {}

    def add_step(self, step_name: str) -> None:
        model = self.spec.model
        step = model.steps[step_name]
        info = self.auto.resolve(step_name, step, _step_info(step_name, step, model))
        self.steps[step_name] = info
        templates = _StepTemplates(step, self.run_id)
        step_params = self.trial_params if self.overridden & templates.variables else self.params
        context = {**self.base_context, "step": step_name}
        produced: list[Node] = []
        parent_index = [
            _names_index(self.by_step[need], [a for a in self.steps[need].axes if a in info.axes])
            for need in step.needs
        ]
        for values in itertools.product(*(model.matrix[axis] for axis in info.axes)):
            coords = dict(zip(info.axes, values, strict=True))
            context.update(coords)
            name = ".".join((step_name, *values))
            if name in self.nodes:
                raise _collision(self.spec, step_name, name)
            parents: list[str] = []
            for key_of, index in parent_index:
                parents.extend(index.get(key_of(coords), ()))
            trial = str(self.trial_number) if self.trial_number is not None else coords.get("trial")
            node = Node(
                name=name,
                step=step_name,
                argv=templates.argv(context),
                env=templates.env(context),
                coords=coords,
                parents=parents,
                inputs=templates.inputs(context),
                outputs=templates.outputs(context),
                trial=int(trial) if trial is not None and trial.isdigit() else None,
                params=step_params,
                metrics=templates.metrics(context),
                checkpoint_files=templates.checkpoint_files(context),
            )
            self.nodes[name] = node
            produced.append(node)
        self.by_step[step_name] = produced
        if step.publish:
            self._add_publish(step_name, step.publish, info, produced, context)
        if step.promote_if:
            self._add_promote(step_name, step, info, produced, context)

    def _add_publish(
        self, step_name: str, publish: str, info: StepInfo, produced: list[Node], context: dict[str, str]
    ) -> None:
        """`<step>.publish.<coords>`: after each node, upload its outputs to its rendered `publish:`."""
        self.steps[step_name + PUBLISH_SUFFIX] = _helper_step(info, PUBLISH_SUFFIX)
        destination = parse_template(publish)
        published = []
        for node in produced:
            context.update(node.coords)
            url = destination.render(context)
            helper = self._helper_node(step_name, PUBLISH_SUFFIX, node, ["publish", url, *node.outputs])
            helper.inputs = list(node.outputs)
            published.append(helper)
        self.by_step[step_name + PUBLISH_SUFFIX] = published

    def _add_promote(
        self, step_name: str, step: StepSpec, info: StepInfo, produced: list[Node], context: dict[str, str]
    ) -> None:
        """`<step>.promote.<coords>`: after each evaluate node and the publish of the model it evaluated,
        move the `than` pointer to that model if its metric is better."""
        promote = step.promote_if
        assert promote is not None
        model = promote.model or next(need for need in step.needs if self.spec.model.steps[need].publish)
        model_axes = [axis for axis in self.steps[model].axes if axis in info.axes]
        key_of, index = _names_index(self.by_step[model + PUBLISH_SUFFIX], model_axes)
        self.steps[step_name + PROMOTE_SUFFIX] = _helper_step(info, PROMOTE_SUFFIX)
        pointer = parse_template(promote.than)
        for node in produced:
            context.update(node.coords)
            publishers = [self.nodes[name] for name in index.get(key_of(node.coords), ())]
            if len(publishers) != 1 or not node.metrics:  # validation rules both out
                raise AssertionError(f"{node.name}: expected one published model and a metrics file")
            name = ".".join((step_name + PROMOTE_SUFFIX, *node.coords.values()))
            argv = [
                "promote",
                "--metrics", node.metrics,
                "--metric", promote.metric,
                "--better", promote.better,
                "--than", pointer.render(context),
                "--model", publishers[0].argv[2],
                "--min-delta", repr(promote.min_delta),
                "--run-id", context["run.id"],
                "--node", name,
            ]  # fmt: skip
            helper = self._helper_node(step_name, PROMOTE_SUFFIX, node, argv)
            helper.parents.append(publishers[0].name)

    def _helper_node(self, step: str, suffix: str, of: Node, argv: list[str]) -> Node:
        """A node dagflow adds after `of` to run one of its own commands."""
        name = ".".join((step + suffix, *of.coords.values()))
        if name in self.nodes:
            raise _collision(self.spec, step, name)
        node = Node(
            name=name,
            step=step + suffix,
            argv=[DAGFLOW_LAUNCHER, *argv],
            env=of.env,
            coords=of.coords,
            parents=[of.name],
            trial=of.trial,
            params=of.params,
        )
        self.nodes[name] = node
        return node


def _helper_step(info: StepInfo, suffix: str) -> StepInfo:
    """A step dagflow adds to run one of its own commands per node of info (kind transfer: it runs
    `dagflow`); failures from S3 are retried, bad input (exit 2) is not."""
    return StepInfo(
        name=info.name + suffix,
        kind="transfer",
        axes=info.axes,
        resources=Resources(),
        requirements=None,
        classads={},
        retries=2,
        retry_unless_exit=(2,),
        timeout_s=None,
        priority=info.priority,
        metrics=None,
    )


def _names_index(nodes: Iterable[Node], axes: list[str]) -> tuple[Callable[[dict[str, str]], Hashable], dict]:
    """Node names grouped by their values on axes, and the function that gives coords' group key
    (a value for one axis, a tuple for several, () for none)."""
    key_of: Callable[[dict[str, str]], Hashable] = itemgetter(*axes) if axes else lambda coords: ()
    index: dict[Hashable, list[str]] = {}
    for node in nodes:
        index.setdefault(key_of(node.coords), []).append(node.name)
    return key_of, index


def _collision(spec: Spec, step: str, name: str) -> SpecError:
    path = ("steps", step)
    line, column = spec.positions.of(path, key=True)
    return SpecError([Diagnostic(
        str(spec.file), line, column, dotted(path),
        f"two nodes would both be named {name!r}: matrix values containing '.' make node names ambiguous",
        hint="rename the matrix values or the step",
    )])


def _step_info(name: str, step: StepSpec, model: PipelineSpec) -> StepInfo:
    return StepInfo(
        name=name,
        kind=step.kind,
        axes=tuple(axis for axis in model.matrix if axis not in step.over),
        resources=_resources(step),
        requirements=_requirements(step),
        classads=dict(step.classads),
        retries=step.retries.count,
        retry_unless_exit=tuple(step.retries.unless_exit),
        timeout_s=None if step.timeout == AUTO else step.timeout,
        priority=step.priority,
        metrics=step.metrics,
        checkpoint_exit_code=step.checkpoint.exit_code if step.checkpoint else None,
        checkpoint_files=tuple(step.checkpoint.files) if step.checkpoint else (),
        checkpoint_max_restarts=step.checkpoint.max_restarts if step.checkpoint else 0,
        runtime=_runtime(step, model),
    )


def _runtime(step: StepSpec, model: PipelineSpec) -> Runtime:
    """The step's runtime: each key it sets over the pipeline's."""
    merged: dict[str, str] = {}
    for layer in (model.runtime, step.runtime):
        if layer is not None:
            merged.update({key: getattr(layer, key) for key in layer.model_fields_set if getattr(layer, key)})
    return Runtime(**merged)


def _stricter(own: float | None, placement: float | None) -> float | None:
    if own is None or placement is None:
        return own if placement is None else placement
    return max(own, placement)


_DEFAULTS = Resources()


def _resources(step: StepSpec) -> Resources:
    """The step's resources with its GPU placement class folded in: the class's per-GPU limits stay
    numbers in the plan (each engine places GPUs its own way), the stricter of the step's and the class's."""
    res = step.resources
    placement = gpu_classes()[res.gpu_class] if res.gpu_class else GpuClass()
    # `auto` fields hold the defaults here; AutoResources.resolve puts in what past runs suggest
    memory = _stricter(None if res.gpu_memory == AUTO else res.gpu_memory, placement.gpu_memory_mb)
    return Resources(
        cpus=_DEFAULTS.cpus if res.cpus == AUTO else res.cpus,
        memory_mb=_DEFAULTS.memory_mb if res.memory == AUTO else res.memory,
        disk_mb=res.disk,
        gpus=res.gpus,
        gpu_memory_mb=None if memory is None else int(memory),
        cuda_capability=_stricter(res.cuda_capability, placement.cuda_capability),
        memory_max_mb=res.memory_max,
        memory_growth=res.memory_growth,
    )


def _requirements(step: StepSpec) -> str | None:
    parts = []
    placement = gpu_classes()[step.resources.gpu_class] if step.resources.gpu_class else None
    if placement is not None and placement.requirements:
        parts.append(placement.requirements)
    if step.requirements:
        parts.append(step.requirements.strip())  # as written: the condor engine puts it on one line
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else " && ".join(f"({part})" for part in parts)


class _StepTemplates:
    """A step's templated fields, parsed once and rendered per node."""

    def __init__(self, step: StepSpec, run_id: str) -> None:
        # S3 can change between runs without dagflow seeing it: the run id in a transfer-from-S3 node's
        # environment (so in its fingerprint) makes every run fetch; the transfer skips what is unchanged.
        remote_source = step.kind == "transfer" and (step.from_ or "").lower().startswith("s3://")
        self._extra_env = {"DAGFLOW_RUN_ID": run_id} if remote_source else {}
        if step.kind == "transfer":
            raw_argv = [DAGFLOW_LAUNCHER, "transfer", step.from_ or "", step.to or ""]
        elif isinstance(step.command, str):
            raw_argv = shlex.split(step.command)
        else:
            raw_argv = [str(part) for part in step.command or []]
        self._argv = [parse_template(part) for part in raw_argv]
        # argv is built from a copy of its constant words, rendering only the words that vary
        self._argv_words = [template.parts[0] if template.is_constant else "" for template in self._argv]
        self._argv_varying = [(i, template) for i, template in enumerate(self._argv) if not template.is_constant]
        self._env = {key: parse_template(param_text(value)) for key, value in step.env.items()}
        self._inputs = [parse_template(path) for path in step.inputs]
        self._outputs = [parse_template(path) for path in step.outputs]
        self._metrics = parse_template(step.metrics) if step.metrics else None
        self._checkpoint_files = [parse_template(path) for path in (step.checkpoint.files if step.checkpoint else [])]
        constant_env = _constant_dict(self._env)
        self._constant_env = None if constant_env is None else {**constant_env, **self._extra_env}
        self._constant_inputs = _constant_list(self._inputs)
        self._constant_outputs = _constant_list(self._outputs)
        self._constant_checkpoint_files = _constant_list(self._checkpoint_files)
        every = [*self._argv, *self._env.values(), *self._inputs, *self._outputs, *self._checkpoint_files]
        if self._metrics is not None:
            every.append(self._metrics)
        self.variables = frozenset(name for template in every for name in template.variables)

    def argv(self, context: dict[str, str]) -> list[str]:
        argv = self._argv_words.copy()
        for index, template in self._argv_varying:
            argv[index] = template.render(context)
        return argv

    def checkpoint_files(self, context: dict[str, str]) -> list[str]:
        if self._constant_checkpoint_files is not None:
            return self._constant_checkpoint_files
        return [template.render(context) for template in self._checkpoint_files]

    def metrics(self, context: dict[str, str]) -> str | None:
        return self._metrics.render(context) if self._metrics else None

    def env(self, context: dict[str, str]) -> dict[str, str]:
        if self._constant_env is not None:
            return self._constant_env
        return {**{key: template.render(context) for key, template in self._env.items()}, **self._extra_env}

    def inputs(self, context: dict[str, str]) -> list[str]:
        if self._constant_inputs is not None:
            return self._constant_inputs
        return [template.render(context) for template in self._inputs]

    def outputs(self, context: dict[str, str]) -> list[str]:
        if self._constant_outputs is not None:
            return self._constant_outputs
        return [template.render(context) for template in self._outputs]


def _constant_dict(templates: dict[str, Template]) -> dict[str, str] | None:
    """The one dict all nodes can share when no value depends on the node."""
    if all(template.is_constant for template in templates.values()):
        return {key: template.parts[0] for key, template in templates.items()}
    return None


def _constant_list(templates: list[Template]) -> list[str] | None:
    if all(template.is_constant for template in templates):
        return [template.parts[0] for template in templates]
    return None
