"""The quoting functions, checked against HTCondor's own parsers (htcondor2.Submit, classad2)."""

from __future__ import annotations

import classad2
import htcondor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagflow.engines.condor import escape
from tests.condor_helpers import argv_of, environment_canonical, environment_expected

HOSTILE = [
    "$(ENV(HOME))",
    "$HOME and ${HOME}",
    "echo $$ $",
    "$$$ end",
    "cost: 5$",
    "$",
    "#not a comment",
    "back\\slash\\",
    'double "quote"',
    "single 'quote'",
    "it''s",
    "\"'\\$#",
    "queue",
    "x = y",
    "naïve 日本語 ✓ 🚀",
    "a" * 10_000,
    "",
    " leading and trailing ",
]
# Everything a user can type on one line: printable text, no control characters.
printable = st.text(st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\u2028\u2029"), max_size=60)


# Values no submit-language spelling can carry: refused, never passed on altered.
UNREPRESENTABLE = ["$$(Cpus)", "$$([Memory * 2])", "$ENV(HOME)", "$INT(X)", "a $(DOLLAR) b", "$$x"]
# Dollar-heavy text around the macro forms HTCondor knows, for the property tests.
dollar_text = st.lists(
    st.sampled_from(["$", "$$", "(", ")", "[", "]", "{", "}", "DOLLAR", "ENV", "HOME", "F", "x", " ", "'", '"', "\\"]),
    max_size=10,
).map("".join)


def submit_with(lines: str, **macros: str) -> htcondor2.Submit:
    submit = htcondor2.Submit(lines + "\nqueue\n")
    for name, value in macros.items():
        submit[name] = value
    return submit


@pytest.mark.parametrize("value", [v for v in HOSTILE if v and v == v.strip() and not v.endswith("\\")])
def test_submit_literal_reads_back_exactly(value: str) -> None:
    submit = submit_with(f"MyValue = {escape.submit_literal(value)}\nNext = 1")
    assert submit.expand("MyValue") == value
    assert submit.expand("Next") == "1"


@pytest.mark.parametrize("value", ["back\\slash\\", "trailing ", " leading", "x \\ ", ""])
def test_submit_literal_refuses_what_the_submit_language_would_alter(value: str) -> None:
    # A trailing backslash continues the line: it would swallow the next command.
    with pytest.raises(ValueError):
        escape.submit_literal(value)


@pytest.mark.parametrize("value", HOSTILE)
def test_classad_string_reads_back_exactly_through_submit_and_classad(value: str) -> None:
    submit = submit_with(f"My.Probe = {escape.classad_string(value)}")
    ad = classad2.ClassAd()
    ad["Probe"] = classad2.ExprTree(submit.expand("My.Probe"))
    assert ad.eval("Probe") == value


@pytest.mark.parametrize("value", UNREPRESENTABLE)
def test_values_no_spelling_can_carry_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="cannot be passed literally"):
        escape.submit_literal(value)
    with pytest.raises(ValueError, match="cannot be passed literally"):
        escape.arguments(["python", value])


@settings(max_examples=500)
@given(st.one_of(printable, dollar_text))
def test_submit_literal_round_trips_or_refuses(value: str) -> None:
    try:
        text = escape.submit_literal(value)
    except ValueError:
        return
    submit = submit_with(f"MyValue = {text}\nNext = 1")
    assert submit.expand("MyValue") == value
    assert submit.expand("Next") == "1"


@given(st.text(st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="$\u2028\u2029")))
def test_classad_string_parses_back_in_classad2(value: str) -> None:
    # classad2.quote spells non-ASCII as octal escapes; both spellings must read back the same.
    assert classad2.unquote(escape.classad_string(value)) == value == classad2.unquote(classad2.quote(value))


@pytest.mark.parametrize("value", HOSTILE)
def test_arguments_read_back_as_the_same_argv(value: str) -> None:
    argv = ["python", value, "--flag", value]
    submit = submit_with('arguments = "$(Args)"', Args=escape.arguments(argv))
    assert argv_of(submit) == argv


@settings(max_examples=300)
@given(st.lists(st.one_of(printable, dollar_text), min_size=1, max_size=5))
def test_arguments_round_trip_any_printable_argv(argv: list[str]) -> None:
    try:
        text = escape.arguments(argv)
    except ValueError:
        return
    submit = submit_with('arguments = "$(Args)"', Args=text)
    assert argv_of(submit) == argv


@pytest.mark.parametrize("value", [v for v in HOSTILE if ";" not in v])
def test_environment_reads_back_as_the_same_values(value: str) -> None:
    env = {"HOSTILE": value, "PLAIN": "1"}
    submit = submit_with('environment = "$(Env)"', Env=escape.environment(env))
    expanded = submit.expand("environment")
    assert environment_canonical(expanded[1:-1].replace('""', '"')) == environment_expected(env)


def test_environment_refuses_bad_names() -> None:
    with pytest.raises(ValueError, match="variable name"):
        escape.environment({"A=B": "x"})


@pytest.mark.parametrize("value", HOSTILE)
def test_vars_value_quoting_follows_the_dagman_rules(value: str) -> None:
    inner = escape.vars_escape(value)  # the inside of the quotes dag_writer.py puts around it
    # DAGMan: inside the quotes, \" is a quote and \\ a backslash; nothing else is special.
    decoded, index = [], 0
    while index < len(inner):
        if inner[index] == "\\":
            assert inner[index + 1] in '\\"'
            decoded.append(inner[index + 1])
            index += 2
        else:
            assert inner[index] != '"', "an unescaped quote would end the value"
            decoded.append(inner[index])
            index += 1
    assert "".join(decoded) == value


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "tab\there", "nul\x00", "del\x7f", "c1\x85", "ls\u2028"])
@pytest.mark.parametrize(
    "function",
    [
        escape.submit_literal,
        escape.classad_string,
        lambda v: escape.arguments(["python", v]),
        lambda v: escape.environment({"X": v}),
        escape.dag_path,
    ],
)
def test_control_characters_are_refused_everywhere(function, bad: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        function(bad)


def test_classad_values() -> None:
    assert escape.classad_value(True) == "true"
    assert escape.classad_value(3) == "3"
    assert escape.classad_value(0.5) == "0.5"
    assert escape.classad_value("a$b") == '"a$(DOLLAR)b"'
    with pytest.raises(ValueError, match="finite"):
        escape.classad_value(float("nan"))


@pytest.mark.parametrize("name", ["DagflowArgs", "a_1", "X"])
def test_macro_names_accepted(name: str) -> None:
    assert escape.macro_name(name) == name


@pytest.mark.parametrize("name", ["queue_x", "QUEUEfoo", "a-b", "a b", "", "a$"])
def test_macro_names_refused(name: str) -> None:
    with pytest.raises(ValueError):
        escape.macro_name(name)


@pytest.mark.parametrize("name", ["train.us.3", "fetch_a-1", "report"])
def test_node_names_accepted(name: str) -> None:
    assert escape.node_name(name) == name


@pytest.mark.parametrize("name", ["a b", "a+b", "PARENT", "child", "ALL_NODES", "-x", ".x", "", 'a"b', "a#b"])
def test_node_names_refused(name: str) -> None:
    with pytest.raises(ValueError):
        escape.node_name(name)
