"""Expansion: fan-out per matrix value, gathering with over:, templates and parents."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from dagflow.engines.condor.step_fields import requirements_expression
from dagflow.engines.registry import spec_checks
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.plan.render import to_dot
from dagflow.policies import gpu_classes
from dagflow.spec import load_spec, parse_spec

SKETCH = Path(__file__).parent / "data" / "design_sketch.yaml"


def plan_of(text: str, run_id: str = "r1") -> Plan:
    return expand(parse_spec(textwrap.dedent(text), "p.yaml", engines=spec_checks()), run_id=run_id)


def test_sketch_expands_per_region_with_one_gathering_report() -> None:
    plan = expand(load_spec(SKETCH, spec_checks()), run_id="r1")
    assert len(plan.nodes) == 13
    assert plan.nodes["train.br"].argv == [
        "python",
        "train.py",
        "--data",
        "data/br",
        "--lr",
        "0.01",
        "--out",
        "models/br",
    ]
    assert plan.nodes["train.br"].parents == ["fetch.br"]
    assert plan.nodes["fetch.jp"].argv == ["dagflow", "transfer", "s3://ratings/jp/latest/", "data/jp/"]
    assert sorted(plan.nodes["report"].parents) == ["evaluate.br", "evaluate.de", "evaluate.jp", "evaluate.us"]
    assert plan.nodes["report"].coords == {}
    assert plan.steps["train"].engine_fields == {
        "condor": {"requirements": ["CUDACapability >= 7.0"], "classads": {"DagflowTeam": "recs"}}
    }
    order = list(plan.nodes)
    for parent, child in plan.edges():
        assert order.index(parent) < order.index(child)


def test_two_axes_gather_over_one() -> None:
    plan = plan_of("""\
        name: p
        matrix: {region: [us, br], trial: [0, 1, 2]}
        steps:
          train: {command: "t {region} {trial} {run.id} {step} {pipeline}"}
          best: {command: "b {trial}", over: [region], needs: [train]}
          publish: {command: "p {region}", needs: [best], over: [trial]}
          check: {command: "c {region} {trial}", needs: [best]}
        """)
    assert plan.nodes["train.us.2"].argv == ["t", "us", "2", "r1", "train", "p"]
    assert plan.nodes["train.us.2"].trial == 2
    assert sorted(plan.nodes["best.1"].parents) == ["train.br.1", "train.us.1"]
    # fanning out again after a gather: each publish node needs every best node
    assert sorted(plan.nodes["publish.br"].parents) == ["best.0", "best.1", "best.2"]
    # and a fanned-out child of a gather needs the one gather node on its shared axes
    assert plan.nodes["check.us.1"].parents == ["best.1"]


def test_quoted_arguments_stay_whole_and_braces_escape() -> None:
    plan = plan_of("""\
        name: p
        params: {msg: "hello world"}
        steps:
          a:
            command: "echo '{params.msg}' {{literal}}"
            env: {MSG: "{params.msg}", FLAG: true}
        """)
    node = plan.nodes["a"]
    assert node.argv == ["echo", "hello world", "{literal}"]
    assert node.env == {"MSG": "hello world", "FLAG": "true"}


def test_gpu_class_and_user_requirements_combine() -> None:
    plan = plan_of("""\
        name: p
        steps:
          a:
            command: echo
            resources: {gpus: 2, gpu_class: 80gb, cuda_capability: 8.0}
            requirements: OpSys == "LINUX"
        """)
    step = plan.steps["a"]
    # the class's per-GPU limit stays a number in the plan; the engine decides how to place GPUs
    assert step.engine_fields == {"condor": {"requirements": ['OpSys == "LINUX"']}}
    assert step.resources.gpus == 2 and step.resources.cuda_capability == 8.0
    assert step.resources.gpu_memory_mb == 79000


def test_the_stricter_of_class_and_step_limits_wins() -> None:
    plan = plan_of("""\
        name: p
        steps:
          a:
            command: echo
            resources: {gpus: 1, gpu_class: ampere-or-newer, cuda_capability: 7.0, gpu_memory: 30GB}
          b:
            command: echo
            resources: {gpus: 1, gpu_class: 40gb, gpu_memory: 100GB, cuda_capability: 9.0}
          c:
            command: echo
            resources: {gpus: 1, gpu_class: any-gpu}
        """)
    a, b, c = (plan.steps[name].resources for name in "abc")
    assert (a.cuda_capability, a.gpu_memory_mb) == (8.0, 30720)
    assert (b.cuda_capability, b.gpu_memory_mb) == (9.0, 102400)
    assert (c.cuda_capability, c.gpu_memory_mb) == (None, None)
    assert all(plan.steps[name].engine_fields == {} for name in "abc")


def test_a_site_class_with_machine_requirements_still_ands_them(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "gpu-classes.yaml").write_text(
        "classes:\n  site-a100:\n    gpu_memory_mb: 40000\n    requirements: 'TARGET.Rack == \"r7\"'\n"
    )
    monkeypatch.setenv("DAGFLOW_POLICIES", str(tmp_path))
    gpu_classes.cache_clear()
    try:
        plan = plan_of("""\
            name: p
            steps:
              a: {command: echo, resources: {gpus: 1, gpu_class: site-a100}, requirements: OpSys == "LINUX"}
            """)
    finally:
        monkeypatch.delenv("DAGFLOW_POLICIES")
        gpu_classes.cache_clear()
    step = plan.steps["a"]
    # the expressions that must all hold, the class's first: the condor engine ANDs them in its own words
    assert step.engine_fields == {"condor": {"requirements": ['TARGET.Rack == "r7"', 'OpSys == "LINUX"']}}
    assert requirements_expression(step) == '(TARGET.Rack == "r7") && (OpSys == "LINUX")'
    assert step.resources.gpu_memory_mb == 40000


def test_plan_round_trips_through_json() -> None:
    plan = expand(load_spec(SKETCH, spec_checks()), run_id="r1")
    again = Plan.from_json(plan.to_json())
    assert again.to_dict() == plan.to_dict()
    assert json.loads(plan.to_json())["nodes"][0]["name"] == "fetch.us"


def test_fingerprint_changes_with_params_and_command() -> None:
    first = plan_of("name: p\nparams: {lr: 0.1}\nsteps:\n  a: {command: 't {params.lr}'}\n")
    second = plan_of("name: p\nparams: {lr: 0.2}\nsteps:\n  a: {command: 't {params.lr}'}\n")
    same = plan_of("name: p\nparams: {lr: 0.1}\nsteps:\n  a: {command: 't {params.lr}'}\n", run_id="r2")
    fp = first.node_fingerprint
    assert fp(first.nodes["a"]) != second.node_fingerprint(second.nodes["a"])
    assert fp(first.nodes["a"]) == same.node_fingerprint(same.nodes["a"])


def test_dot_output_is_a_digraph() -> None:
    lines = list(to_dot(expand(load_spec(SKETCH, spec_checks()), run_id="r1")))
    assert lines[0] == 'digraph "ratings-retrain" {'
    assert '  "evaluate.us" -> "report";' in lines


def test_gc_paused_freezes_only_big_blocks() -> None:
    import gc

    from dagflow.gc_pause import FREEZE_ABOVE, gc_paused

    gc.unfreeze()  # what earlier tests in this process froze could be freed meanwhile and lower the count
    before = gc.get_freeze_count()
    try:
        with gc_paused():
            small = [[] for _ in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() == before
        with gc_paused():
            big = [[] for _ in range(FREEZE_ABOVE + 1000)]
        assert gc.isenabled() and gc.get_freeze_count() >= before + len(big)
        assert small and big
    finally:
        gc.unfreeze()
