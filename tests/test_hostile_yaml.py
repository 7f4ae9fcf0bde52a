"""Hostile YAML: alias bombs, recursive aliases and deep nesting end in a located exit-2 error, quickly.

Documents that could crash the interpreter (a C-stack overflow is a segfault) are loaded in a child
process, so a crash fails one test instead of killing the test run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_local_support import cli_env

from dagflow.errors import SpecError
from dagflow.spec import parse_spec
from dagflow.spec.yamlpos import MAX_DEPTH, MAX_NODES

PIPELINE = "name: p\nsteps:\n  a: {command: echo}\n"


def laughs(levels: int, width: int = 9) -> str:
    """Billion laughs: each level lists the previous one `width` times, so the document expands to width**levels."""
    lines = [f"x0: &x0 [{', '.join(['lol'] * width)}]"]
    lines += [f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return PIPELINE + "\n".join(lines) + "\n"


def merge_bomb(levels: int) -> str:
    """The same blow-up through merge keys: each mapping merges the previous one under several keys."""
    lines = ["m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8}"]
    for i in range(1, levels + 1):
        lines.append(f"m{i}: &m{i} {{{', '.join(f'k{j}: {{<<: *m{i - 1}}}' for j in range(8))}}}")
    return PIPELINE + "\n".join(lines) + "\n"


def flow_nesting(depth: int) -> str:
    return PIPELINE + "deep: " + "[" * depth + "]" * depth + "\n"


def block_nesting(depth: int) -> str:
    return PIPELINE + "deep:\n" + "".join(" " * level + f"k{level}:\n" for level in range(1, depth + 1))


def diagnostics_of(text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(text, "bomb.yaml")
    return [d.render() for d in caught.value.diagnostics]


def cli_validate(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    # the timeout only keeps a regression from hanging the suite; nothing here measures time
    return subprocess.run(
        [sys.executable, "-m", "dagflow", "validate", path.name],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300,
    )


def assert_clean_exit_2(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr[-2000:]


def test_billion_laughs_names_the_limit_and_the_alias_that_exceeds_it() -> None:
    [message] = diagnostics_of(laughs(9))  # 9**10 values once expanded; the file is under 500 bytes
    assert message.startswith("bomb.yaml:"), message
    assert f"more than {MAX_NODES:,} values" in message
    line = int(message.split(":")[1])
    assert 4 <= line <= 13, message  # a line of the x-levels, not the file's start


def test_billion_laughs_at_the_command_line(tmp_path: Path) -> None:
    result = cli_validate(tmp_path, laughs(6))
    assert_clean_exit_2(result, "bomb.yaml:9:10: x5[0]: expanding alias *x4", f"{MAX_NODES:,}")


def written_out(steps: int) -> str:
    """A pipeline of one-node steps written out the way workflow converters write them: 22 values a step."""
    lines = ["name: big", "steps:"]
    for index in range(steps):
        needs = sorted({f"s{index - 1}", f"s{(index - 1) // 2}"}) if index else []
        lines += [f"  s{index}:", '    command: "true"', f"    outputs: [data/s{index}.out, data/s{index}.log]",
                  "    resources: {cpus: 1, memory: 100MB}"]
        if needs:
            lines += [f"    needs: [{', '.join(needs)}]", f"    inputs: [{', '.join(f'data/{n}.out' for n in needs)}]"]
    return "\n".join(lines) + "\n"


def test_values_written_out_do_not_count_against_the_limit() -> None:
    spec = parse_spec(written_out(6000), "big.yaml")  # 131,992 values, none of them from an alias
    assert len(spec.model.steps) == 6000


def test_aliases_count_what_they_add_on_top_of_a_big_written_out_file() -> None:
    text = written_out(6000) + "x0: &x0 [" + ", ".join(["lol"] * 9) + "]\n"
    text += "".join(f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9)}]\n" for i in range(1, 7))
    [message] = diagnostics_of(text)  # the same alias as in a file holding nothing else stops it
    assert message.startswith(f"bomb.yaml:{text.count(chr(10)) - 1}:10: x5[0]: expanding alias *x4"), message


def test_merge_key_bomb_is_refused() -> None:
    [message] = diagnostics_of(merge_bomb(8))
    assert f"more than {MAX_NODES:,} values" in message


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("a: &a [*a]\n", "bomb.yaml:1:8"),
        ("a: &a {<<: *a}\n", "bomb.yaml:1:12"),
        ("a: &a {b: [1, {c: *a}]}\n", "bomb.yaml:1:19"),
    ],
)
def test_recursive_alias_is_a_located_error(text: str, where: str) -> None:
    [message] = diagnostics_of(text)
    assert message.startswith(where), message
    assert "refers to the collection it is inside" in message


def test_recursive_alias_at_the_command_line(tmp_path: Path) -> None:
    assert_clean_exit_2(cli_validate(tmp_path, "a: &a {<<: *a}\n"), "bomb.yaml:1:12")


def test_undefined_alias_is_a_located_error() -> None:
    [message] = diagnostics_of(PIPELINE + "x: *nope\n")
    assert message.startswith("bomb.yaml:4:4:"), message
    assert "nope" in message


@pytest.mark.parametrize("make", [flow_nesting, block_nesting])
def test_nesting_past_the_limit_names_it_and_the_line(make) -> None:  # type: ignore[no-untyped-def]
    [message] = diagnostics_of(make(MAX_DEPTH + 1))
    assert f"nested deeper than {MAX_DEPTH} levels" in message
    assert message.startswith("bomb.yaml:4:") or message.startswith(f"bomb.yaml:{4 + MAX_DEPTH}:"), message


def test_nesting_through_a_chain_of_aliases_counts_as_nesting() -> None:
    chain = "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, MAX_DEPTH + 1))
    [message] = diagnostics_of(PIPELINE + "a0: &a0 [x]\n" + chain)  # 2 levels as written, 100 once expanded
    assert f"nested deeper than {MAX_DEPTH} levels once alias *a98 is expanded" in message
    assert message.startswith(f"bomb.yaml:{3 + MAX_DEPTH}:12: a99[0]: "), message  # line of a99


@pytest.mark.parametrize("make", [flow_nesting, block_nesting])
def test_nesting_up_to_the_limit_loads(make) -> None:  # type: ignore[no-untyped-def]
    depth = MAX_DEPTH - 1  # the document's own mapping is one level
    spec_error = diagnostics_of(make(depth))  # `deep` is an unknown key, but the document loads
    assert any("unknown key 'deep'" in message for message in spec_error)


@pytest.mark.parametrize(("make", "depth"), [(flow_nesting, 500), (flow_nesting, 100_000), (block_nesting, 3_000)])
def test_deep_nesting_at_the_command_line_is_exit_2_not_a_crash(tmp_path: Path, make, depth: int) -> None:  # type: ignore[no-untyped-def]
    assert_clean_exit_2(cli_validate(tmp_path, make(depth)), f"nested deeper than {MAX_DEPTH} levels")


def test_a_second_document_is_refused() -> None:
    [message] = diagnostics_of(PIPELINE + "---\nname: q\n")
    assert message.startswith("bomb.yaml:4:1:"), message
    assert "single document" in message


def test_ordinary_anchors_and_merge_keys_still_work() -> None:
    spec = parse_spec(
        textwrap.dedent("""\
        name: p
        matrix: {region: &regions [us, br], zone: *regions}
        params: {lr: 0.1}
        steps:
          a: &a {command: "echo {region}", resources: {cpus: 3}}
          b: {<<: *a, needs: [a]}
        """),
        "p.yaml",
    )
    assert spec.model.matrix["zone"] == ["us", "br"]
    assert spec.model.steps["b"].resources.cpus == 3
    assert spec.positions.of(("steps", "b", "resources", "cpus")) == (5, 54)
