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
from dagflow.gpu_memory import GPU_MEMORY, GPU_MEMORY_MARK
from dagflow.plan.file_edges import undeclared_dependencies
from dagflow.plan.file_words import file_words, uses_files
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
from dagflow.spec.load import Spec
from dagflow.spec.model import AUTO, NeedSpec, PipelineSpec, StepSpec, fan_out_axes
from dagflow.spec.sections import NO_ENGINES, EngineSections
from dagflow.spec.sharing import shared_outputs
from dagflow.spec.templates import Template, parse_template
from dagflow.spec.yamlpos import dotted

StepResolver = Callable[[str, StepSpec, StepInfo], StepInfo]
"""Fills in a step's `auto` resources: (step name, its spec, its StepInfo with the defaults) -> the StepInfo
to plan with. The callers that plan for a run pass resources/auto.py's AutoResources(spec).resolve (what the
pipeline's earlier runs used); without one, `auto` fields keep their defaults and no history is read."""


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
    sorter = TopologicalSorter({name: step.needed_steps for name, step in model.steps.items()})
    sorter.prepare()
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=declared.__getitem__)
        order.extend(ready)
        sorter.done(*ready)
    return order


def expand(
    spec: Spec,
    run_id: str | None = None,
    params: Mapping[str, Any] | None = None,
    trial: int | None = None,
    resolve: StepResolver | None = None,
) -> Plan:
    """The plan of spec. `params` overrides the pipeline's params (a search trial's point) and `trial`
    marks every node with the trial number. A node records (and fingerprints) the params its step's
    templates name, at the values this run gives them: a node that uses none of the overridden params
    fingerprints (and caches) exactly as in a plain run. `resolve` fills
    in `auto` resources (StepResolver)."""
    with gc_paused():
        return _expand(spec, run_id, params or {}, trial, resolve)


def _expand(
    spec: Spec,
    run_id: str | None,
    overrides: Mapping[str, Any],
    trial_number: int | None,
    resolve: StepResolver | None,
) -> Plan:
    expander = _Expander(spec, run_id or new_run_id(spec.model.name), overrides, trial_number, resolve)
    for step_name in step_order(spec.model):
        expander.add_step(step_name)
    _check_paths(spec, expander.nodes)
    return Plan(
        pipeline=spec.model.name,
        run_id=expander.run_id,
        source=str(spec.file),
        steps=expander.steps,
        nodes=expander.nodes,
        workdir=str(spec.file.parent),
        engine_defaults=_engine_defaults(spec.model, spec.engines or NO_ENGINES),
    )


def _engine_defaults(model: PipelineSpec, engines: EngineSections) -> dict[str, dict[str, Any]]:
    """The engines' blocks the pipeline declares, each with the settings it sets (a flag or the engine's
    default rules the rest)."""
    blocks = {engine: getattr(model, engine, None) for engine, section in engines.sections if section.block}
    return {engine: {key: getattr(block, key) for key in block.model_fields_set}
            for engine, block in blocks.items() if block is not None}


class _Expander:
    """What one expansion builds up: the plan's steps and nodes, and each step's nodes for wiring."""

    def __init__(
        self,
        spec: Spec,
        run_id: str,
        overrides: Mapping[str, Any],
        trial_number: int | None,
        resolve: StepResolver | None,
    ) -> None:
        model = spec.model
        self.spec = spec
        self.run_id = run_id
        self.trial_number = trial_number
        self.base_context = {"run.id": run_id, "pipeline": model.name, GPU_MEMORY: GPU_MEMORY_MARK}
        self.resolve = resolve  # `auto` resources, learned from the pipeline's past runs (StepResolver)
        self.base_context.update({f"params.{name}": param_text(value) for name, value in model.params.items()})
        self.base_context.update({f"params.{name}": param_text(value) for name, value in overrides.items()})
        self.params = {**model.params, **overrides}  # the values this run gives each param
        self.steps: dict[str, StepInfo] = {}
        self.nodes: dict[str, Node] = {}
        self.by_step: dict[str, list[Node]] = {}

    def add_step(self, step_name: str) -> None:
        model = self.spec.model
        step = model.steps[step_name]
        info = _step_info(step_name, step, model, self.spec.engines or NO_ENGINES)
        if self.resolve is not None:
            info = self.resolve(step_name, step, info)
        self.steps[step_name] = info
        context = {**self.base_context, "step": step_name}
        templates = _StepTemplates(step, context, info.axes)
        # a node records the params it runs with: those its templates name, at this run's values
        step_params = {name: value for name, value in self.params.items() if f"params.{name}" in templates.variables}
        produced: list[Node] = []
        parent_index = [
            _names_index(self.by_step[need], [a for a in self.steps[need].axes if a in info.axes])
            for need in step.needs if isinstance(need, str) or not need.match
        ]
        step_wide = {name: value for name, value in context.items() if name not in info.axes}
        matchers = [
            _Matcher(need, self.by_step[need.step], self.steps[need.step].axes, info.axes, step_wide)
            for need in step.needs if not isinstance(need, str) and need.match
        ]
        nodes = self.nodes
        node_fields = templates.node_fields
        axes = info.axes
        trial_of = _trial_numbers(self.trial_number, model.matrix.get("trial") if "trial" in axes else None)
        fixed_trial = _trial_int(str(self.trial_number)) if self.trial_number is not None else None
        for pairs in _coordinates(model, step, axes):
            coords = dict(pairs)
            name = ".".join((step_name, *coords.values()))
            if name in nodes:
                raise _collision(self.spec, step_name, name)
            if len(parent_index) == 1:
                key_of, index = parent_index[0]
                parents = list(index.get(key_of(coords), ()))
                if not parents:
                    raise self._unmatched(step_name, step, name, coords)
            else:
                parents = []
                for key_of, index in parent_index:
                    found = index.get(key_of(coords))
                    if found is None:
                        raise self._unmatched(step_name, step, name, coords)
                    parents.extend(found)
                for matcher in matchers:
                    parents.extend(matcher.parents(coords, self.spec, step_name, name))
            argv, env, inputs, outputs, metrics, checkpoint_files = node_fields(coords)
            trial = fixed_trial if trial_of is None else trial_of[coords["trial"]]
            # positional: Node's field order (plan/model.py); keywords cost more than the rest of the loop
            node = Node(
                name, step_name, argv, env, coords, parents, inputs, outputs, trial, step_params, metrics,
                checkpoint_files,
            )  # fmt: skip
            nodes[name] = node
            produced.append(node)
        self.by_step[step_name] = produced
        if step.publish:
            self._add_publish(step_name, step.publish, info, produced, context)
        if step.promote_if:
            self._add_promote(step_name, step, info, produced, context)

    def _unmatched(self, step_name: str, step: StepSpec, name: str, coords: Mapping[str, str]) -> SpecError:
        """The error of a node none of whose candidate parents in a plainly needed step exists."""
        for index, need in enumerate(step.needs):
            needed = need if isinstance(need, str) else need.step
            if isinstance(need, str) or not need.match:
                shared = {axis: coords[axis] for axis in self.steps[needed].axes if axis in coords}
                if not any(all(node.coords.get(a) == v for a, v in shared.items()) for node in self.by_step[needed]):
                    return _no_parent(self.spec, (step_name, index), name, needed, shared)
        raise AssertionError(f"{name}: a parent is missing, but every plain need has one")

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
        model = promote.model or next(need for need in step.needed_steps if self.spec.model.steps[need].publish)
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
        retries=2,
        retry_unless_exit=(2,),
        timeout_s=None,
        priority=info.priority,
        metrics=None,
    )


class _Matcher:
    """The parents one `{step, match}` need gives a node: the needed step's nodes whose coordinates on the
    matched axes are the rendered values (each value of a list), and agree on the axes both steps share."""

    def __init__(self, need: NeedSpec, nodes: list[Node], their_axes: tuple[str, ...], axes: tuple[str, ...],
                 step_wide: Mapping[str, str]) -> None:
        self.need = need
        self.shared = [axis for axis in their_axes if axis in axes and axis not in need.match]
        self.templates = [
            [_fill(parse_template(value), step_wide) for value in (values if isinstance(values, list) else [values])]
            for values in need.match.values()
        ]
        keys = [*self.shared, *need.match]
        self.index: dict[tuple[str, ...], list[str]] = {}
        for node in nodes:
            self.index.setdefault(tuple(node.coords[axis] for axis in keys), []).append(node.name)

    def parents(self, coords: dict[str, str], spec: Spec, step: str, name: str) -> list[str]:
        shared = tuple(coords[axis] for axis in self.shared)
        found: list[str] = []
        for values in itertools.product(*([template.render(coords) for template in each] for each in self.templates)):
            names = self.index.get(shared + values)
            if names is None:
                wanted = dict(zip([*self.shared, *self.need.match], shared + values, strict=True))
                index = spec.model.steps[step].needs.index(self.need)
                raise _no_parent(spec, (step, index), name, self.need.step, wanted)
            found.extend(names)
        return list(dict.fromkeys(found))


def _no_parent(spec: Spec, need: tuple[str, int], name: str, needed: str, wanted: Mapping[str, str]) -> SpecError:
    path = ("steps", need[0], "needs", need[1])
    line, column = spec.positions.of(path)
    coordinates = " ".join(f"{axis}={value}" for axis, value in wanted.items())
    return SpecError([Diagnostic(
        spec.filename or str(spec.file), line, column, dotted(path),
        f"node {name} needs the node of step {needed!r} with {coordinates}, but that step has no such node",
        hint=f"check the values of step {needed!r} and of this step's matrix",
    )])


def _coordinates(model: PipelineSpec, step: StepSpec, axes: tuple[str, ...]) -> Iterable[tuple[tuple[str, str], ...]]:
    """Each node's (axis, value) pairs in axes order: the product of the pipeline's axes the step fans out over,
    crossed with the step's own combinations. (dict() of pairs is twice as fast as dict(zip(axes, values)).)"""
    own = step.matrix.names if step.matrix is not None else ()
    outer = itertools.product(*([(axis, value) for value in model.matrix[axis]] for axis in axes if axis not in own))
    if step.matrix is None:
        return outer
    rows = [tuple(zip(own, combination, strict=True)) for combination in step.matrix.combinations()]
    return (pairs + row for pairs in outer for row in rows)


def _names_index(nodes: Iterable[Node], axes: list[str]) -> tuple[Callable[[dict[str, str]], Hashable], dict]:
    """Node names grouped by their values on axes, and the function that gives coords' group key
    (a value for one axis, a tuple for several, () for none)."""
    key_of: Callable[[dict[str, str]], Hashable] = itemgetter(*axes) if axes else lambda coords: ()
    index: dict[Hashable, list[str]] = {}
    for node in nodes:
        index.setdefault(key_of(node.coords), []).append(node.name)
    return key_of, index


def _check_paths(spec: Spec, nodes: Mapping[str, Node]) -> None:
    """Refuse a plan in which two nodes write one file (dagflow's helper nodes write nothing), or a node
    reads what a step it does not need writes (file_edges.py)."""
    filename = spec.filename or str(spec.file)
    problems = shared_outputs(nodes.values(), spec.positions.of, filename)
    problems += undeclared_dependencies(spec.model, nodes.values(), spec.positions.of, filename)
    if problems:
        raise SpecError(problems)


def _collision(spec: Spec, step: str, name: str) -> SpecError:
    path = ("steps", step)
    line, column = spec.positions.of(path, key=True)
    return SpecError([Diagnostic(
        str(spec.file), line, column, dotted(path),
        f"two nodes would both be named {name!r}: matrix values containing '.' make node names ambiguous",
        hint="rename the matrix values or the step",
    )])


def _step_info(name: str, step: StepSpec, model: PipelineSpec, engines: EngineSections) -> StepInfo:
    return StepInfo(
        name=name,
        kind=step.kind,
        axes=fan_out_axes(model.matrix, step.over, step.matrix.names if step.matrix is not None else ()),
        resources=_resources(step),
        retries=step.retries.count,
        retry_unless_exit=tuple(step.retries.unless_exit),
        timeout_s=None if step.timeout == AUTO else step.timeout,
        priority=step.priority,
        metrics=step.metrics,
        checkpoint_exit_code=step.checkpoint.exit_code if step.checkpoint else None,
        checkpoint_files=tuple(step.checkpoint.files) if step.checkpoint else (),
        checkpoint_max_restarts=step.checkpoint.max_restarts if step.checkpoint else 0,
        runtime=_runtime(step, model),
        engine_fields={engine: fields for engine, section in engines.sections if (fields := section.fields_of(step))},
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
    # `auto` fields hold the defaults here; the StepResolver puts in what past runs suggest
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


def _trial_numbers(trial_number: int | None, trial_values: list[str] | None) -> dict[str, int | None] | None:
    """Each value of the step's `trial` axis -> the trial number of its nodes (None if it is not a number);
    None when a node's trial number does not depend on it: a search trial's expansion marks every node
    with the trial's own number, and a step without the axis has none."""
    if trial_number is not None or trial_values is None:
        return None
    return {value: _trial_int(value) for value in trial_values}


def _trial_int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


class _StepTemplates:
    """A step's templated fields, parsed once and rendered per node.

    What is the same for every node of the step (params, run id, pipeline and step names, the GPU memory
    mark) is filled in once here, so a node renders only the parts that name its matrix coordinates, from
    its coords alone; a field left with no variable is built once and shared by every node."""

    def __init__(self, step: StepSpec, context: Mapping[str, str], axes: tuple[str, ...]) -> None:
        if step.kind == "transfer":
            raw_argv = [DAGFLOW_LAUNCHER, "transfer", step.from_ or "", step.to or ""]
        elif isinstance(step.command, str):
            raw_argv = shlex.split(step.command)
        else:
            raw_argv = [str(part) for part in step.command or []]
        argv = [parse_template(part) for part in raw_argv]
        env = {key: parse_template(param_text(value)) for key, value in step.env.items()}
        inputs = [parse_template(path) for path in step.inputs]
        outputs = [parse_template(path) for path in step.outputs]
        metrics = parse_template(step.metrics) if step.metrics else None
        checkpoint_files = [parse_template(path) for path in (step.checkpoint.files if step.checkpoint else [])]
        every = [*argv, *env.values(), *inputs, *outputs, *checkpoint_files, *([metrics] if metrics else [])]
        self.variables = frozenset(name for template in every for name in template.variables)

        step_wide = {name: value for name, value in context.items() if name not in axes}
        argv = [_fill(template, step_wide) for template in argv]
        # argv is built from a copy of its constant words, rendering only the words that vary
        self._argv_words = [template.parts[0] if template.is_constant else "" for template in argv]
        self._argv_varying = [
            (i, template) for i, template in enumerate(argv) if not template.is_constant and not uses_files(template)
        ]
        self._argv_files = [(i, template) for i, template in enumerate(argv) if uses_files(template)]
        self._env = {key: _fill(template, step_wide) for key, template in env.items()}
        self._inputs = [_fill(template, step_wide) for template in inputs]
        self._outputs = [_fill(template, step_wide) for template in outputs]
        self._metrics = _fill(metrics, step_wide) if metrics else None
        self._checkpoint_files = [_fill(template, step_wide) for template in checkpoint_files]
        self._constant_env = _constant_dict(self._env)
        self._constant_inputs = _constant_list(self._inputs)
        self._constant_outputs = _constant_list(self._outputs)
        self._constant_checkpoint_files = _constant_list(self._checkpoint_files)
        # when only argv differs between nodes, the rest is one tuple they share
        self._shared: tuple[Any, ...] | None = None
        if (self._metrics is None or self._metrics.is_constant) and None not in (
            self._constant_env, self._constant_inputs, self._constant_outputs, self._constant_checkpoint_files
        ):  # fmt: skip
            metrics_text = self._metrics.parts[0] if self._metrics else None
            self._shared = (
                self._constant_env, self._constant_inputs, self._constant_outputs, metrics_text,
                self._constant_checkpoint_files,
            )  # fmt: skip

    def node_fields(self, coords: dict[str, str]) -> tuple[Any, ...]:
        """A node's (argv, env, inputs, outputs, metrics, checkpoint_files), rendered from its coords."""
        argv = self._argv_words.copy()
        for index, template in self._argv_varying:
            argv[index] = template.render(coords)
        if self._argv_files:
            inputs, outputs = self.inputs(coords), self.outputs(coords)
            for index, template in reversed(self._argv_files):
                argv[index : index + 1] = file_words(template, coords, inputs, outputs)
        if self._shared is not None:
            return (argv, *self._shared)
        return (
            argv, self.env(coords), self.inputs(coords), self.outputs(coords), self.metrics(coords),
            self.checkpoint_files(coords),
        )  # fmt: skip

    def checkpoint_files(self, coords: dict[str, str]) -> list[str]:
        if self._constant_checkpoint_files is not None:
            return self._constant_checkpoint_files
        return [template.render(coords) for template in self._checkpoint_files]

    def metrics(self, coords: dict[str, str]) -> str | None:
        return self._metrics.render(coords) if self._metrics else None

    def env(self, coords: dict[str, str]) -> dict[str, str]:
        if self._constant_env is not None:
            return self._constant_env
        return {key: template.render(coords) for key, template in self._env.items()}

    def inputs(self, coords: dict[str, str]) -> list[str]:
        if self._constant_inputs is not None:
            return self._constant_inputs
        return [template.render(coords) for template in self._inputs]

    def outputs(self, coords: dict[str, str]) -> list[str]:
        if self._constant_outputs is not None:
            return self._constant_outputs
        return [template.render(coords) for template in self._outputs]


def _fill(template: Template, known: Mapping[str, str]) -> Template:
    """template with the variables known names replaced by their values: the rest stay variables."""
    parts = template.parts
    if len(parts) == 1 or not any(name in known for name in parts[1::2]):
        return template
    filled = [parts[0]]
    for name, literal in zip(parts[1::2], parts[2::2], strict=True):
        if name in known:
            filled[-1] += known[name] + literal
        else:
            filled += [name, literal]
    return Template(tuple(filled))


def _constant_dict(templates: dict[str, Template]) -> dict[str, str] | None:
    """The one dict all nodes can share when no value depends on the node."""
    if all(template.is_constant for template in templates.values()):
        return {key: template.parts[0] for key, template in templates.items()}
    return None


def _constant_list(templates: list[Template]) -> list[str] | None:
    if all(template.is_constant for template in templates):
        return [template.parts[0] for template in templates]
    return None
