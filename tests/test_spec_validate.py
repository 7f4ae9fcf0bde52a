"""Validation: every error located (file:line:column + field path), all reported at once."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dagflow.engines.registry import spec_checks
from dagflow.errors import SpecError
from dagflow.search.checks import check_search
from dagflow.spec import load_spec, parse_spec

SKETCH = Path(__file__).parent / "data" / "design_sketch.yaml"


def errors_of(text: str) -> list[str]:
    """The problems every command's loader reports: the document's own and each engine's spec check's."""
    with pytest.raises(SpecError) as caught:
        parse_spec(textwrap.dedent(text), "p.yaml", engines=spec_checks())
    return [d.render() for d in caught.value.diagnostics]


def one_error(text: str) -> str:
    rendered = errors_of(text)
    assert len(rendered) == 1, rendered
    return rendered[0]


def test_design_sketch_is_accepted_as_written() -> None:
    spec = load_spec(SKETCH, spec_checks())
    assert list(spec.model.steps) == ["fetch", "train", "evaluate", "report"]
    train = spec.model.steps["train"]
    assert train.resources.gpus == 1
    assert train.resources.gpu_memory == 16 * 1024
    assert train.resources.memory == 8 * 1024
    assert train.retries.count == 2
    assert train.classads == {"DagflowTeam": "recs"}
    assert spec.model.search is not None and spec.model.search.variables["lr"].scale == "log"
    assert spec.model.schedule is not None and spec.model.schedule.cron == "0 3 * * *"


def test_yaml_syntax_error_is_located() -> None:
    message = one_error("name: x\nsteps:\n  a: {command: [x]\n")
    assert message.startswith("p.yaml:4:1: ") and "YAML syntax error" in message


def test_unknown_key_with_suggestion() -> None:
    message = one_error("""\
        name: x
        steps:
          a:
            comand: echo hi
        """)
    # the unknown key, and the missing command it hides
    assert "p.yaml:4:5: steps.a.comand: unknown key 'comand'" in message or "comand" in message


def test_unknown_key_reports_position_allowed_and_hint() -> None:
    rendered = errors_of("""\
        name: x
        steps:
          a:
            command: echo hi
            neds: [b]
        """)
    assert rendered == [
        "p.yaml:5:5: steps.a.neds: unknown key 'neds' (allowed: kind, description, needs, matrix, over, command, "
        "from, to, resources, requirements, classads, env, retries, timeout, priority, inputs, outputs, "
        "metrics, publish, promote_if, runtime, checkpoint); did you mean 'needs'?"
    ]


def test_wrong_type_and_bad_units() -> None:
    rendered = errors_of("""\
        name: x
        steps:
          a:
            command: echo hi
            priority: high
            resources: {memory: 16 GiBs, cpus: 0}
            timeout: soon
        """)
    text = "\n".join(rendered)
    assert "p.yaml:5:15: steps.a.priority: expected a whole number, not 'high'" in text
    assert "p.yaml:6:25: steps.a.resources.memory: '16 GiBs' is not a size (allowed: a number of MB" in text
    assert "steps.a.resources.cpus: must be at least 1 (or 'auto')" in text
    assert "p.yaml:7:14: steps.a.timeout: 'soon' is not a duration" in text
    assert len(rendered) == 4


def test_duplicate_step_names() -> None:
    message = one_error("""\
        name: x
        steps:
          a: {command: echo 1}
          a: {command: echo 2}
        """)
    assert message.startswith("p.yaml:4:3: steps.a: duplicate key 'a' (first defined on line 3)")


def test_a_key_other_tools_use_names_the_field_that_means_it() -> None:
    """A newcomer's `source:`/`dest:` on a transfer step pointed at 'resources' (the closest spelling)."""
    rendered = errors_of("""\
        name: x
        steps:
          fetch: {kind: transfer, source: raw/, dest: data/}
          train: {command: echo hi, depends_on: [fetch]}
        """)
    hints = [line.rsplit("; ", 1)[-1] for line in rendered]
    assert hints == ["did you mean 'from'?", "did you mean 'to'?", "did you mean 'needs'?"], rendered


def test_needs_unknown_step_suggests_closest() -> None:
    message = one_error("""\
        name: x
        steps:
          train: {command: echo 1}
          evaluate: {command: echo 2, needs: [trian]}
        """)
    assert message == (
        "p.yaml:4:39: steps.evaluate.needs[0]: needs 'trian', but there is no step of that name "
        "(allowed: train); did you mean 'train'?"
    )


def test_cycle_shown_as_path() -> None:
    message = one_error("""\
        name: x
        steps:
          a: {command: echo 1, needs: [c]}
          b: {command: echo 2, needs: [a]}
          c: {command: echo 3, needs: [b]}
        """)
    assert "steps form a cycle: a -> b -> c -> a" in message
    assert message.startswith("p.yaml:3:")


def test_every_disjoint_cycle_is_reported() -> None:
    rendered = errors_of("""\
        name: x
        steps:
          a: {command: echo, needs: [b]}
          b: {command: echo, needs: [a]}
          c: {command: echo}
          d: {command: echo, needs: [e, c]}
          e: {command: echo, needs: [d]}
        """)
    assert [line.split(": ", 2)[2] for line in rendered] == [
        "steps form a cycle: a -> b -> a",
        "steps form a cycle: d -> e -> d",
    ]


def test_unknown_template_variable_and_gathered_axis() -> None:
    rendered = errors_of("""\
        name: x
        matrix: {region: [us, br]}
        params: {lr: 0.1}
        steps:
          train: {command: "python t.py --lr {params.lrr} --r {regoin}"}
          report: {command: "python r.py {region}", over: [region], needs: [train]}
        """)
    text = "\n".join(rendered)
    assert "unknown template variable {params.lrr}" in text and "did you mean 'params.lr'?" in text
    assert "unknown template variable {regoin}" in text and "did you mean 'region'?" in text
    assert "{region} has no single value in a step that gathers over 'region'" in text


def test_empty_axis_and_unknown_over_axis() -> None:
    text = "\n".join(
        errors_of("""\
        name: x
        matrix: {region: []}
        steps:
          a: {command: echo, over: [regoin]}
        """)
    )
    assert "p.yaml:2:18: matrix.region: matrix axis 'region' has no values" in text
    assert "over names 'regoin', which is not a matrix axis" in text and "did you mean 'region'?" in text


def test_requirements_must_parse_as_classad() -> None:
    message = one_error("""\
        name: x
        steps:
          a: {command: echo, requirements: "CUDACapability >= && "}
        """)
    assert "does not parse as a ClassAd expression" in message
    assert message.startswith("p.yaml:3:36: steps.a.requirements")


def test_kind_typo_suggests_kind() -> None:
    message = one_error("""\
        name: x
        steps:
          a: {kind: trian, command: echo}
        """)
    assert "did you mean 'train'?" in message


def test_transfer_needs_from_and_to() -> None:
    message = one_error("""\
        name: x
        steps:
          fetch: {kind: transfer, from: s3://b/p}
        """)
    assert "a transfer step needs to" in message


def test_control_characters_are_refused() -> None:
    message = one_error("""\
        name: x
        params: {note: "a\\nrequirements = True"}
        steps:
          a: {command: echo}
        """)
    assert "params.note: control characters" in message


def test_hostile_matrix_value_is_refused() -> None:
    message = one_error("""\
        name: x
        matrix: {region: ["us\\"\\nrequirements = True"]}
        steps:
          a: {command: echo}
        """)
    assert "matrix.region[0]" in message and "is not allowed here" in message


def test_shell_operators_explained() -> None:
    message = one_error("""\
        name: x
        steps:
          a: {command: "python t.py | tee log"}
        """)
    assert "shell operators | are not interpreted here" in message


def test_reserved_classad_names() -> None:
    message = one_error("""\
        name: x
        matrix: {region: [us]}
        steps:
          a: {command: echo, classads: {DagflowRegion: x, Team: y}}
        """)
    assert "'DagflowRegion' is set by dagflow or HTCondor itself" in message


def test_many_errors_reported_at_once() -> None:
    rendered = errors_of("""\
        name: x
        steps:
          a: {command: echo, needs: [nope], priority: x}
          b: {kinds: train, command: "echo {nope}"}
        """)
    assert len(rendered) == 4


def test_missing_file_and_non_mapping() -> None:
    with pytest.raises(SpecError, match="no such file"):
        load_spec("/nonexistent/pipeline.yaml")
    assert "must be a mapping" in one_error("- a\n- b\n")


def test_search_variables_need_a_default_param() -> None:
    message = "\n".join(
        errors_of("""\
        name: x
        params: {lr: 0.1}
        steps:
          a: {command: "t {params.lr} {params.hidden}"}
        search:
          objective: {metric: loss}
          variables:
            lr: {type: FLOAT, min: 0.001, max: 1}
            hidden: {type: INT, min: 1, max: 9}
        """)
    )
    assert "unknown template variable {params.hidden}" in message
    assert "search.variables.hidden: search variable 'hidden' has no default in params" in message


def test_unicode_line_separator_is_refused_like_a_newline() -> None:
    message = one_error('name: x\nparams: {note: "a\\u2028b"}\nsteps:\n  a: {command: echo}\n')
    assert "params.note: control characters" in message


def test_a_mapping_in_needs_that_is_not_a_need_is_a_located_error() -> None:
    assert errors_of("name: x\nsteps:\n  a: {command: echo, needs: [{b: 1}]}\n") == [
        "p.yaml:3:30: steps.a.needs[0]: missing required key 'step' (or text)",
        "p.yaml:3:31: steps.a.needs[0].b: unknown key 'b' (allowed: step, match)",
    ]


SEARCH = """\
name: s
matrix: {region: [us, br]}
params: {lr: 0.1}
steps:
  evaluate:
    kind: evaluate
    command: "ev {params.lr} {region}"
    metrics: METRICS
search:
  objective: {metric: loss}
  variables:
    lr: {type: FLOAT, min: 0.001, max: 1}
  parallel: PARALLEL
  PER
  engine: ENGINE
"""


def search_doc(metrics: str = "out/{run.id}/{region}.json", parallel: int = 2, per: bool = False,
               engine: str = "gp") -> str:
    text = SEARCH.replace("METRICS", metrics).replace("PARALLEL", str(parallel)).replace("ENGINE", engine)
    return text.replace("PER", "per: region" if per else "budget: 4")


def search_error(text: str) -> str:
    spec = parse_spec(text, "p.yaml", engines=spec_checks())  # a plain run does not need the search to be runnable
    with pytest.raises(SpecError) as caught:
        check_search(spec, "p.yaml")
    [message] = [d.render() for d in caught.value.diagnostics]
    return message


def test_a_sound_search_block_is_accepted() -> None:
    check_search(parse_spec(search_doc(), "p.yaml", engines=spec_checks()))


@pytest.mark.parametrize("per", [False, True])
def test_trials_sharing_a_metrics_path_are_refused_by_validation(per: bool) -> None:
    message = search_error(search_doc("out/{region}.json", 2, per))
    assert message.startswith("p.yaml:8:14: steps.evaluate.metrics: every trial would write the same metrics file")
    assert "{run.id}" in message


@pytest.mark.parametrize("per", [False, True])
def test_regions_sharing_a_metrics_path_are_refused_as_nodes_sharing_it(per: bool) -> None:
    """What a plain run of the pipeline would do too, so it is refused for searches per region as well."""
    from dagflow.plan.expand import expand

    with pytest.raises(SpecError) as caught:
        expand(parse_spec(search_doc("out/metrics.json", 1, per), "p.yaml", engines=spec_checks()), run_id="validate")
    [message] = [d.render() for d in caught.value.diagnostics]
    assert message.startswith("p.yaml:8:14: steps.evaluate.metrics: node evaluate.br would write 'out/metrics.json'")


def test_one_trial_at_a_time_may_reuse_its_metrics_path() -> None:
    check_search(parse_spec(search_doc("out/{region}.json", parallel=1), "p.yaml", engines=spec_checks()))


def test_search_engine_and_objective_step_are_checked_by_validation() -> None:
    assert "search.engine: unknown optimiser 'bayes'" in search_error(search_doc(engine="bayes"))
    no_metrics = search_doc().replace("    metrics: out/{run.id}/{region}.json\n", "")
    assert "search.objective: no step has `metrics:`" in search_error(no_metrics)


@pytest.mark.slow
def test_validate_command_refuses_what_search_run_refuses(tmp_path: Path) -> None:
    import subprocess
    import sys

    from test_local_support import cli_env

    (tmp_path / "p.yaml").write_text(search_doc("out/{region}.json"))
    for args in (["validate", "p.yaml"], ["search", "run", "p.yaml", "--db", "s.db"]):
        result = subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=tmp_path, env=cli_env(),
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "p.yaml:8:14: steps.evaluate.metrics: every trial would write the same metrics file" in result.stderr
        assert "Traceback" not in result.stderr


def test_a_gather_over_a_list_is_a_located_error_not_a_traceback() -> None:
    """Found by test_spec_fuzz: `over: [[]]` made the axes rule hash a list (TypeError)."""
    text = """\
name: p
matrix: {region: [us, br]}
steps:
  a:
    command: echo {region}
  report:
    needs: [a]
    over: [[]]
    command: echo hi
"""
    assert errors_of(text) == ["p.yaml:8:12: steps.report.over[0]: expected text, not a list"]


def test_a_promoting_step_gathering_over_a_list_is_a_located_error_not_a_traceback() -> None:
    """The promotion check's twin of the rule above hashed `over` values too (TypeError before)."""
    text = """\
name: p
matrix: {region: [us, br]}
steps:
  train:
    kind: train
    command: echo {region}
    outputs: ["m/{region}"]
    publish: "out/{region}/{run.id}/"
  evaluate:
    kind: evaluate
    needs: [train]
    over: [[]]
    command: echo hi
    metrics: m.json
    promote_if: {metric: loss, better: lower, than: "ptr/latest"}
"""
    assert errors_of(text) == ["p.yaml:12:12: steps.evaluate.over[0]: expected text, not a list"]
