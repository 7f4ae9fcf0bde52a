"""The YAML the manuals show is YAML dagflow reads: every fenced ```yaml block of README.md, the docs
site's pages (docs/) and examples/*/README.md parses with dagflow's own loader, and a block that is a
whole pipeline (it has `steps:`) passes `dagflow validate`. Inline flow mappings in the tables
(`{files: [...], ...}`) parse too.

A `{` inside a flow collection (`[ckpt/{region}]`) is the mistake the manual itself made: its YAML error
says so, with the fix.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_local_support import dagflow_cli

from dagflow.errors import SpecError
from dagflow.spec.yamlpos import load_yaml

REPO = Path(__file__).resolve().parent.parent
MANUALS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "examples").glob("*/README.md"))]
FENCED_YAML = re.compile(r"^```ya?ml\n(.*?)^```", re.DOTALL | re.MULTILINE)
# `{files: [...]}` or `checkpoint: {files: [...]}` on one line of a table: what a reader copies into a file
INLINE_FLOW_MAPPING = re.compile(r"`((?:[a-z_]+: )?\{[^`\n]*: [^`\n]*\})`")


def fenced_blocks(fence: re.Pattern[str]) -> list[tuple[Path, int, str]]:
    """(manual, line of its first line, text) of every block `fence` matches in the manuals."""
    found = []
    for manual in MANUALS:
        text = manual.read_text(encoding="utf-8")
        for match in fence.finditer(text):
            found.append((manual, text.count("\n", 0, match.start(1)) + 1, match.group(1)))
    return found


def _blocks() -> list[tuple[str, str]]:
    """(where, text) of every fenced YAML block in the manuals; where is FILE:LINE of its first line."""
    return [(f"{manual.relative_to(REPO)}:{line}", text) for manual, line, text in fenced_blocks(FENCED_YAML)]


def _inline_mappings() -> list[tuple[str, str]]:
    found = []
    for manual in MANUALS:
        for number, line in enumerate(manual.read_text(encoding="utf-8").splitlines(), start=1):
            for match in INLINE_FLOW_MAPPING.finditer(line):
                # a `\|` in a Markdown table cell is a literal `|`
                found.append((f"{manual.relative_to(REPO)}:{number}", match.group(1).replace("\\|", "|")))
    return found


BLOCKS = _blocks()
PIPELINES = [(where, text) for where, text in BLOCKS if re.search(r"^steps:", text, re.MULTILINE)]


def test_the_manuals_have_yaml_to_check() -> None:
    assert len(BLOCKS) >= 5 and len(PIPELINES) >= 3 and len(_inline_mappings()) >= 8


@pytest.mark.parametrize(("where", "text"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_every_yaml_block_parses(where: str, text: str) -> None:
    try:
        load_yaml(text, where)
    except SpecError as error:
        pytest.fail(f"the YAML block at {where} does not parse:\n{error}")


@pytest.mark.parametrize(("where", "text"), _inline_mappings(), ids=[where for where, _ in _inline_mappings()])
def test_every_inline_flow_mapping_parses(where: str, text: str) -> None:
    try:
        load_yaml(text, where)
    except SpecError as error:
        pytest.fail(f"the inline YAML {text!r} at {where} does not parse:\n{error}")


@pytest.mark.parametrize(("where", "text"), PIPELINES, ids=[where for where, _ in PIPELINES])
def test_every_whole_pipeline_validates(where: str, text: str, tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(text, encoding="utf-8")
    result = dagflow_cli("validate", "pipeline.yaml", cwd=tmp_path)
    assert result.returncode == 0, f"the pipeline at {where} is not valid:\n{result.stderr}"
    # (the README's snippets come without their scripts, which validate would name as missing)
    warnings = [line for line in result.stderr.splitlines() if "warning" in line and "the command runs" not in line]
    assert not warnings, f"the pipeline at {where} draws warnings:\n{result.stderr}"


# The manual's own checkpoint snippet as it was: `{` inside `[...]` starts a mapping.
CHECKPOINT_SNIPPET = """\
name: spot
matrix: {region: [us]}
steps:
  train:
    kind: train
    command: python train.py --ckpt checkpoints/{region} --out models/{region}
    checkpoint:
      files: [checkpoints/{region}]   # relative to the job's directory; never absolute or outside it
"""
FLOW_BRACE_HINT = "a `{` inside `[...]` or `{...}` starts a mapping: quote the value or use a block list"


def test_a_brace_inside_a_flow_sequence_names_the_fix(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(CHECKPOINT_SNIPPET)
    result = dagflow_cli("validate", "pipeline.yaml", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    expected = "pipeline.yaml:8:27: <document>: YAML syntax error: did not find expected ',' or ']'"
    assert f"{expected}; {FLOW_BRACE_HINT}" in result.stderr


def test_a_brace_inside_a_flow_mapping_names_the_fix(tmp_path: Path) -> None:
    """The table's promote_if form as it was: `than: s3://.../{region}/latest` inside `{...}`."""
    (tmp_path / "pipeline.yaml").write_text(
        "name: p\nmatrix: {region: [us]}\nsteps:\n  evaluate:\n    command: echo\n"
        "    promote_if: {metric: val_loss, better: lower, than: s3://bucket/models/{region}/latest}\n"
    )
    result = dagflow_cli("validate", "pipeline.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "pipeline.yaml:6:76: <document>: YAML syntax error: did not find expected ',' or '}'" in result.stderr
    assert FLOW_BRACE_HINT in result.stderr


def test_a_value_starting_with_a_brace_names_the_fix(tmp_path: Path) -> None:
    """`to: {region}/data` reads `{region}` as a mapping and then stumbles on the rest."""
    (tmp_path / "pipeline.yaml").write_text("name: p\nsteps:\n  a:\n    command: echo\n    to: {region}/data\n")
    result = dagflow_cli("validate", "pipeline.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "pipeline.yaml:5:17: <document>: YAML syntax error: " in result.stderr
    assert "a value that starts with `{` is a mapping: quote it" in result.stderr
