"""A step's own matrix (axes, include rows, a values file), {step, match} needs, and {inputs}/{outputs} in
commands: how they expand, and every mistake located at file:line:column with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dagflow.engines.registry import spec_checks
from dagflow.errors import SpecError
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.spec import load_spec

PAIRS = """\
name: pairs
matrix: {band: [j, h]}
steps:
  project:
    matrix: {image: [m1, m2, m3]}
    command: python p.py {band} {image} {outputs}
    outputs: ["proj/{band}/{image}.json"]
  diff:
    matrix: {include: INCLUDE}
    needs: [{step: project, match: {image: ["{a}", "{b}"]}}]
    command: [sh, -c, "cat {inputs} > {outputs[0]}"]
    inputs: ["proj/{band}/{a}.json", "proj/{band}/{b}.json"]
    outputs: ["diff/{band}/{a}-{b}.json"]
  concat:
    needs: [diff]
    command: python c.py {inputs[0]} --out={outputs}
    inputs: ["diff/{band}"]
    outputs: ["fits/{band}.json"]
"""
INLINE = '[{a: m1, b: m2}, {a: m2, b: m3}]'


def write(tmp_path: Path, text: str, **files: str) -> Path:
    for name, content in files.items():
        (tmp_path / name.replace("_", ".")).write_text(content)
    (tmp_path / "p.yaml").write_text(textwrap.dedent(text))
    return tmp_path / "p.yaml"


def plan_of(path: Path) -> Plan:
    return expand(load_spec(path, spec_checks()), run_id="r1")


def errors_of(path: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        plan_of(path)
    return [diagnostic.render().replace(str(path.parent) + "/", "") for diagnostic in caught.value.diagnostics]


def test_pairs_need_the_two_tiles_they_name_of_their_band(tmp_path: Path) -> None:
    plan = plan_of(write(tmp_path, PAIRS.replace("INCLUDE", INLINE)))
    assert [name for name in plan.nodes if name.startswith("diff.")] == [
        "diff.j.m1.m2", "diff.j.m2.m3", "diff.h.m1.m2", "diff.h.m2.m3"
    ]  # fmt: skip
    assert plan.nodes["diff.h.m2.m3"].parents == ["project.h.m2", "project.h.m3"]
    assert plan.nodes["diff.h.m2.m3"].coords == {"band": "h", "a": "m2", "b": "m3"}
    assert plan.nodes["project.j.m3"].coords == {"band": "j", "image": "m3"}
    assert plan.nodes["concat.h"].parents == ["diff.h.m1.m2", "diff.h.m2.m3"]
    assert plan.steps["diff"].axes == ("band", "a", "b")


def test_inputs_and_outputs_become_argv_words(tmp_path: Path) -> None:
    plan = plan_of(write(tmp_path, PAIRS.replace("INCLUDE", INLINE)))
    assert plan.nodes["project.h.m1"].argv == ["python", "p.py", "h", "m1", "proj/h/m1.json"]
    assert plan.nodes["diff.j.m1.m2"].argv == ["sh", "-c", "cat proj/j/m1.json proj/j/m2.json > diff/j/m1-m2.json"]
    assert plan.nodes["concat.j"].argv == ["python", "c.py", "diff/j", "--out=fits/j.json"]


@pytest.mark.parametrize(("name", "content"), [
    ("pairs.csv", "a,b\nm1,m2\n\nm2,m3\n"),
    ("pairs.json", '[{"a": "m1", "b": "m2"}, {"a": "m2", "b": "m3"}]'),
    ("pairs.yaml", "- {a: m1, b: m2}\n- {a: m2, b: m3}\n"),
])  # fmt: skip
def test_a_values_file_gives_the_rows_an_inline_list_gives(tmp_path: Path, name: str, content: str) -> None:
    inline = plan_of(write(tmp_path, PAIRS.replace("INCLUDE", INLINE)))
    from_file = plan_of(write(tmp_path, PAIRS.replace("INCLUDE", name), **{name.replace(".", "_"): content}))
    assert {n: node.parents for n, node in from_file.nodes.items()} == {
        n: node.parents for n, node in inline.nodes.items()
    }


def test_a_row_naming_a_pipeline_axis_makes_an_uneven_fan_out(tmp_path: Path) -> None:
    path = write(tmp_path, """\
        name: lanes
        matrix: {sample: [s1, s2]}
        steps:
          map:
            matrix: {include: [{sample: s1, lane: l1}, {sample: s1, lane: l2}, {sample: s2, lane: l1}]}
            command: python map.py {sample} {lane}
          merge:
            needs: [map]
            command: python merge.py {sample}
        """)
    plan = plan_of(path)
    assert list(plan.nodes) == ["map.s1.l1", "map.s1.l2", "map.s2.l1", "merge.s1", "merge.s2"]
    assert plan.nodes["merge.s1"].parents == ["map.s1.l1", "map.s1.l2"]
    assert plan.nodes["merge.s2"].parents == ["map.s2.l1"]


@pytest.mark.parametrize(("name", "content", "message"), [
    ("pairs.csv", "a,b\nm1,m2\nm3\n", "pairs.csv:3: 1 field, but the header names 2 (a, b)"),
    ("pairs.csv", "a,b\nm1,m2\nm2,x y\n", "pairs.csv:3: b: 'x y' is not allowed here (allowed: letters"),
    ("pairs.yaml", "- {a: m1, b: m2}\n- {a: m2, b: [m3]}\n", "pairs.yaml:2: b: expected text, not a list"),
    ("pairs.json", '[{"a": "m1",', "pairs.json:1:13: not JSON"),
    ("pairs.json", '{"a": "m1"}', "pairs.json: expected a list of mappings"),
    ("pairs.csv", "a,b\n", "pairs.csv: no rows"),
    ("pairs.txt", "m1 m2\n", "pairs.txt: a values file is .csv"),
])  # fmt: skip
def test_a_bad_values_file_is_located_at_the_include_and_at_its_own_line(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    path = write(tmp_path, PAIRS.replace("INCLUDE", name), **{name.replace(".", "_"): content})
    errors = errors_of(path)
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"p.yaml:9:23: steps.diff.matrix.include: {message}"), errors


def test_a_missing_values_file_says_where_it_was_looked_for(tmp_path: Path) -> None:
    errors = errors_of(write(tmp_path, PAIRS.replace("INCLUDE", "nowhere.csv")))
    assert errors == [
        "p.yaml:9:23: steps.diff.matrix.include: nowhere.csv: no such file (relative paths start at the "
        "pipeline's directory)"
    ]


def test_mistakes_in_matrices_needs_and_file_placeholders_are_located(tmp_path: Path) -> None:
    path = write(tmp_path, """\
        name: bad
        matrix: {band: [j]}
        steps:
          project:
            matrix: {image: [m1, m1]}
            command: python p.py {image}
          diff:
            matrix: {include: [{a: m1, b: m2}, {a: m2}]}
            needs: [{step: project, match: {imag: "{a}"}}]
            command: python d.py {inputs[1]} {outputs}
            inputs: ["x/{a}"]
            env: {FILES: "{inputs}"}
          gather:
            matrix: {band: [j]}
            over: [band]
            needs: [{step: nothing}]
            command: python g.py
        """)
    assert errors_of(path) == [
        "p.yaml:5:13: steps.project.matrix: axis 'image' lists a value twice",
        "p.yaml:8:13: steps.diff.matrix: include row 2 names a, but row 1 names a, b",
        "p.yaml:9:37: steps.diff.needs[0].match.imag: match names 'imag', which is not an axis of step "
        "'project' (allowed: band, image); did you mean 'image'?",
        "p.yaml:10:14: steps.diff.command: {inputs[1]} names the step's input or output files: it can be used "
        "in the command only, with an index below the number of paths listed (allowed: {a}, {b}, {band}, "
        "{inputs}, {inputs[0]}, {outputs}, {pipeline}, {run.id}, {step})",
        "p.yaml:12:18: steps.diff.env.FILES: {inputs} names the step's input or output files: it can be used "
        "in the command only, with an index below the number of paths listed (allowed: {a}, {b}, {band}, "
        "{pipeline}, {run.id}, {step})",
        "p.yaml:15:12: steps.gather.over[0]: the step's own matrix fans out over 'band': it cannot also gather "
        "over it",
        "p.yaml:16:20: steps.gather.needs[0].step: needs 'nothing', but there is no step of that name "
        "(allowed: project, diff)",
    ]


def test_a_pair_naming_a_tile_that_does_not_exist_is_refused_at_the_need(tmp_path: Path) -> None:
    path = write(tmp_path, PAIRS.replace("INCLUDE", "[{a: m1, b: m9}]"))
    assert errors_of(path) == [
        "p.yaml:10:13: steps.diff.needs[0]: node diff.j.m1.m9 needs the node of step 'project' with band=j "
        "image=m9, but that step has no such node; check the values of step 'project' and of this step's matrix"
    ]


def test_the_cli_exits_2_naming_the_place(tmp_path: Path) -> None:
    path = write(tmp_path, PAIRS.replace("INCLUDE", "pairs.csv"), pairs_csv="a;b\n")
    done = subprocess.run([sys.executable, "-m", "dagflow", "validate", str(path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "p.yaml:9:23: steps.diff.matrix.include: pairs.csv:" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


HOSTILE = """\
name: quoting
params: {name: "a b; touch pwned $(touch pwned2)"}
steps:
  make:
    command: [python, -c, "import os, sys; os.mkdir('out'); open(sys.argv[1], 'w').write('made')", "{outputs}"]
    outputs: ["out/{params.name}.txt"]
  copy:
    needs: [make]
    command: [sh, -c, "cat {inputs} > {outputs[0]}"]
    inputs: ["out/{params.name}.txt"]
    outputs: ["copy.txt"]
"""


def test_paths_inside_a_shell_word_are_quoted_so_nothing_in_them_runs(tmp_path: Path) -> None:
    path = write(tmp_path, HOSTILE)
    assert plan_of(path).nodes["copy"].argv == [
        "sh", "-c", "cat 'out/a b; touch pwned $(touch pwned2).txt' > copy.txt"
    ]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "dagflow", "run", "p.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "copy.txt").read_text() == "made"
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_the_schema_documents_the_new_fields() -> None:
    done = subprocess.run([sys.executable, "-m", "dagflow", "schema"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    step = json.loads(done.stdout)["$defs"]["StepSpec"]["properties"]
    assert "include" in step["matrix"]["properties"]
    assert "match" in json.dumps(step["needs"])
    assert "{inputs}" in step["command"]["description"]
