"""dagflow's own check of DAGMan input files (the bindings have no DAG parser).

Checks: known commands only; every JOB's submit file exists and parses; PARENT/CHILD and every
per-node command name a node defined earlier; no cycles; every MAXJOBS category is used; VARS values
are double-quoted with only \\\\ and \\" escapes and carry no live `$` macro. Problems are located
as file:line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import htcondor2
import networkx as nx

NODE_DEFINERS = frozenset({"JOB", "FINAL", "PROVISIONER", "SERVICE"})
NODE_COMMANDS = frozenset({"RETRY", "PRIORITY", "CATEGORY", "VARS", "SCRIPT", "PRE_SKIP", "ABORT-DAG-ON", "DONE"})
OTHER_COMMANDS = frozenset(
    {
        "PARENT",
        "SUBDAG",
        "SPLICE",
        "MAXJOBS",
        "CONFIG",
        "ENV",
        "SET_JOB_ATTR",
        "NODE_STATUS_FILE",
        "JOBSTATE_LOG",
        "DOT",
        "INCLUDE",
        "SUBMIT-DESCRIPTION",
        "SAVE_POINT_FILE",
        "REJECT",
        "CONNECT",
        "PIN_IN",
        "PIN_OUT",
    }
)
KNOWN_COMMANDS = NODE_DEFINERS | NODE_COMMANDS | OTHER_COMMANDS
ALWAYS_UPDATE_LIMIT = 10_000  # nodes past which NODE_STATUS_FILE ALWAYS-UPDATE is costly

_VAR = re.compile(r'[ \t]*([A-Za-z0-9_]+)="((?:[^"\\]|\\.)*)"(?=[ \t]|$)')
_ESCAPE = re.compile(r"\\(.)")
# A `$` that is neither `$(DOLLAR)` nor the continuation of a run dagflow starts with `$(DOLLAR)`.
_LIVE_DOLLAR = re.compile(r"(?<!\$)(?<!\$\(DOLLAR\))\$(?!\(DOLLAR\))")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_INT = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    line: int
    message: str
    severity: str = "error"  # error | warning

    def render(self) -> str:
        return f"{self.file}:{self.line}: {self.severity}: {self.message}"


@dataclass
class DagFile:
    """What a DAG file declares, as far as dagflow reads it."""

    path: Path
    jobs: dict[str, tuple[str, int]] = field(default_factory=dict)  # node -> (submit file, line)
    vars: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> macro -> unescaped value
    edges: list[tuple[str, str, int]] = field(default_factory=list)  # (parent, child, line)
    categories: dict[str, tuple[str, int]] = field(default_factory=dict)  # node -> (category, line)
    maxjobs: dict[str, tuple[int, int]] = field(default_factory=dict)  # category -> (limit, line)
    retries: dict[str, tuple[int, int | None]] = field(default_factory=dict)  # node -> (count, unless)
    priorities: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def submit_path(self, node: str) -> Path:
        submit = Path(self.jobs[node][0])
        return submit if submit.is_absolute() else self.path.parent / submit


def parse_vars(text: str) -> tuple[list[tuple[str, str]], str | None]:
    """Parse the macroname="value" pairs of a VARS line; returns (pairs, first problem or None)."""
    pairs: list[tuple[str, str]] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _VAR.match(text, position)
        if not match:
            rest = text[position:].strip()
            return pairs, f'expected macroname="value" at {rest[:40]!r}'
        name, raw = match.group(1), match.group(2)
        if name.lower().startswith("queue"):
            return pairs, f"macro name {name!r} must not start with 'queue'"
        bad = next((m.group(1) for m in _ESCAPE.finditer(raw) if m.group(1) not in '\\"'), None)
        if bad is not None:
            return pairs, f"macro {name}: unknown escape '\\{bad}' (only \\\\ and \\\" are escapes)"
        value = _ESCAPE.sub(lambda m: m.group(1), raw)
        if _CONTROL.search(value):
            return pairs, f"macro {name}: value contains a control character"
        if _LIVE_DOLLAR.search(value):
            return pairs, (
                f"macro {name}: value contains '$' the submit language would expand as a macro "
                "(dagflow writes $(DOLLAR) for a literal $)"
            )
        pairs.append((name, value))
        position = match.end()
    return pairs, None


class _Parser:
    def __init__(self, path: Path) -> None:
        self.dag = DagFile(path=path)
        self.file = str(path)
        self.defined: set[str] = set()

    def problem(self, line: int, message: str, severity: str = "error") -> None:
        self.dag.problems.append(Problem(self.file, line, message, severity))

    def need_node(self, name: str, number: int, command: str, allow_all: bool = True) -> bool:
        if (allow_all and name == "ALL_NODES") or name in self.defined:
            return True
        self.problem(number, f"{command} names node {name!r}, which is not defined above this line")
        return False

    def need_int(self, token: str, number: int, what: str, minimum: int | None = None) -> int | None:
        if not _INT.fullmatch(token):
            self.problem(number, f"{what} must be an integer, not {token!r}")
            return None
        value = int(token)
        if minimum is not None and value < minimum:
            self.problem(number, f"{what} must be at least {minimum}, not {value}")
            return None
        return value

    def parse(self, lines: list[str]) -> DagFile:
        in_block = False
        for number, line in enumerate(lines, start=1):
            stripped = line.strip()
            if in_block:
                in_block = stripped != "}"
                continue
            if not stripped or stripped.startswith("#"):
                continue
            tokens = stripped.split()
            command = tokens[0].upper()
            if command not in KNOWN_COMMANDS:
                self.problem(number, f"unknown DAG command {tokens[0]!r}")
                continue
            if command == "SUBMIT-DESCRIPTION":
                in_block = not stripped.endswith("}")
                continue
            getattr(self, "_" + command.lower().replace("-", "_"), self._other)(tokens, number, stripped)
        if in_block:
            self.problem(len(lines), "SUBMIT-DESCRIPTION block is not closed with '}'")
        return self.dag

    def _define(self, tokens: list[str], number: int, _: str) -> None:
        if len(tokens) < 3:
            self.problem(number, f"{tokens[0]} needs a node name and a submit description")
            return
        name, submit = tokens[1], tokens[2]
        if name in self.defined:
            self.problem(number, f"node {name!r} is defined twice")
        self.defined.add(name)
        extras = tokens[3:]
        index = 0
        while index < len(extras):
            extra = extras[index].upper()
            if extra == "DIR" and index + 1 < len(extras):
                submit = str(Path(extras[index + 1]) / submit)
                index += 2
                continue
            if extra not in {"NOOP", "DONE"}:
                self.problem(number, f"unexpected {extras[index]!r} after the submit file (allowed: DIR d, NOOP, DONE)")
            index += 1
        self.dag.jobs[name] = (submit, number)

    _job = _final = _provisioner = _service = _define

    def _parent(self, tokens: list[str], number: int, _: str) -> None:
        upper = [token.upper() for token in tokens]
        if upper.count("CHILD") != 1:
            self.problem(number, "PARENT line needs exactly one CHILD keyword")
            return
        split = upper.index("CHILD")
        parents, children = tokens[1:split], tokens[split + 1 :]
        if not parents or not children:
            self.problem(number, "PARENT line needs at least one parent and one child")
            return
        for name in parents + children:
            self.need_node(name, number, "PARENT/CHILD", allow_all=False)
        self.dag.edges.extend((parent, child, number) for parent in parents for child in children)

    def _vars(self, tokens: list[str], number: int, stripped: str) -> None:
        if len(tokens) < 3:
            self.problem(number, 'VARS needs a node and at least one macroname="value"')
            return
        node = tokens[1]
        self.need_node(node, number, "VARS")
        rest = stripped.split(None, 2)[2]
        if tokens[2].upper() in {"PREPEND", "APPEND"}:
            rest = rest.split(None, 1)[1] if len(tokens) > 3 else ""
        pairs, problem = parse_vars(rest)
        if problem:
            self.problem(number, f"VARS {node}: {problem}")
        macros = self.dag.vars.setdefault(node, {})
        for name, value in pairs:
            if name in macros:
                self.problem(number, f"VARS {node}: macro {name} is set twice", "warning")
            macros[name] = value

    def _retry(self, tokens: list[str], number: int, _: str) -> None:
        if len(tokens) not in (3, 5) or (len(tokens) == 5 and tokens[3].upper() != "UNLESS-EXIT"):
            self.problem(number, "RETRY syntax is: RETRY node count [UNLESS-EXIT code]")
            return
        self.need_node(tokens[1], number, "RETRY")
        count = self.need_int(tokens[2], number, "retry count", minimum=0)
        unless = self.need_int(tokens[4], number, "UNLESS-EXIT code") if len(tokens) == 5 else None
        if count is not None:
            self.dag.retries[tokens[1]] = (count, unless)

    def _priority(self, tokens: list[str], number: int, _: str) -> None:
        if len(tokens) != 3:
            self.problem(number, "PRIORITY syntax is: PRIORITY node value")
            return
        self.need_node(tokens[1], number, "PRIORITY")
        value = self.need_int(tokens[2], number, "priority")
        if value is not None:
            self.dag.priorities[tokens[1]] = value

    def _category(self, tokens: list[str], number: int, _: str) -> None:
        if len(tokens) != 3:
            self.problem(number, "CATEGORY syntax is: CATEGORY node category")
            return
        self.need_node(tokens[1], number, "CATEGORY")
        self.dag.categories[tokens[1]] = (tokens[2], number)

    def _maxjobs(self, tokens: list[str], number: int, _: str) -> None:
        if len(tokens) != 3:
            self.problem(number, "MAXJOBS syntax is: MAXJOBS category limit")
            return
        value = self.need_int(tokens[2], number, "MAXJOBS limit", minimum=1)
        if value is not None:
            self.dag.maxjobs[tokens[1]] = (value, number)

    def _node_status_file(self, tokens: list[str], number: int, _: str) -> None:
        options = [token.upper() for token in tokens[2:]]
        if len(tokens) < 2 or len(options) > 2:
            self.problem(number, "NODE_STATUS_FILE syntax is: NODE_STATUS_FILE file [seconds] [ALWAYS-UPDATE]")
            return
        for option in options:
            if option != "ALWAYS-UPDATE":
                self.need_int(option, number, "NODE_STATUS_FILE update time", minimum=0)
        if "ALWAYS-UPDATE" in options:
            self.problem(number, "ALWAYS-UPDATE", "warning")  # judged against the node count at the end

    def _dot(self, tokens: list[str], number: int, _: str) -> None:
        allowed = {"UPDATE", "DONT-UPDATE", "OVERWRITE", "DONT-OVERWRITE", "INCLUDE"}
        options = [token.upper() for token in tokens[2:]]
        if len(tokens) < 2:
            self.problem(number, "DOT needs a file name")
        for index, option in enumerate(options):
            if option not in allowed and not (index > 0 and options[index - 1] == "INCLUDE"):
                self.problem(number, f"unknown DOT option {tokens[2 + index]!r}")

    def _jobstate_log(self, tokens: list[str], number: int, _: str) -> None:
        if len(tokens) != 2:
            self.problem(number, "JOBSTATE_LOG syntax is: JOBSTATE_LOG file")

    def _subdag(self, tokens: list[str], number: int, _: str) -> None:
        if len(tokens) < 4 or tokens[1].upper() != "EXTERNAL":
            self.problem(number, "SUBDAG syntax is: SUBDAG EXTERNAL node dagfile")
            return
        self.defined.add(tokens[2])

    def _splice(self, tokens: list[str], number: int, _: str) -> None:
        if len(tokens) < 3:
            self.problem(number, "SPLICE syntax is: SPLICE name dagfile")
            return
        self.defined.add(tokens[1])

    def _reject(self, tokens: list[str], number: int, _: str) -> None:
        self.problem(number, "REJECT: this DAG is marked as not to be run")

    def _script(self, tokens: list[str], number: int, _: str) -> None:
        upper = [token.upper() for token in tokens]
        where = next((i for i, token in enumerate(upper) if token in {"PRE", "POST", "HOLD"}), None)
        if where is None or where + 2 >= len(tokens):
            self.problem(number, "SCRIPT syntax is: SCRIPT [DEFER s t] [DEBUG f t] PRE|POST|HOLD node program")
            return
        self.need_node(tokens[where + 1], number, "SCRIPT")

    def _node_first(self, tokens: list[str], number: int, _: str) -> None:
        if len(tokens) < 2:
            self.problem(number, f"{tokens[0]} needs a node name")
            return
        self.need_node(tokens[1], number, tokens[0].upper())

    _pre_skip = _abort_dag_on = _done = _node_first

    def _other(self, tokens: list[str], number: int, _: str) -> None:
        return None


def parse_dag(path: Path) -> DagFile:
    """Parse a DAG file into what it declares; syntax problems are collected, not raised."""
    path = Path(path)
    return _Parser(path).parse(path.read_text(encoding="utf-8").split("\n"))


def _check_submit(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        return f"cannot read submit file {path}: {error.strerror}"
    try:
        htcondor2.Submit(text)
    except Exception as error:
        return f"submit file {path} does not parse: {error}"
    return None


def lint_dag(path: Path) -> list[Problem]:
    dag = parse_dag(Path(path))
    problems = dag.problems
    file = str(dag.path)
    problems[:] = [
        p
        if p.message != "ALWAYS-UPDATE"
        else Problem(
            p.file,
            p.line,
            f"NODE_STATUS_FILE ALWAYS-UPDATE is costly for {len(dag.jobs)} nodes; drop it",
            "warning",
        )
        for p in problems
        if p.message != "ALWAYS-UPDATE" or len(dag.jobs) > ALWAYS_UPDATE_LIMIT
    ]
    checked: dict[Path, str | None] = {}
    for node, (_, line) in dag.jobs.items():
        submit = dag.submit_path(node)
        if submit not in checked:
            checked[submit] = None if not submit.is_file() else _check_submit(submit)
            if not submit.is_file():
                checked[submit] = f"submit file {submit} does not exist"
        if checked[submit]:
            problems.append(Problem(file, line, f"node {node}: {checked[submit]}"))
    used = {category for category, _ in dag.categories.values()}
    for category, (_, line) in dag.maxjobs.items():
        if category not in used:
            problems.append(Problem(file, line, f"MAXJOBS category {category!r} is used by no CATEGORY line"))
    graph = nx.DiGraph()
    graph.add_edges_from((parent, child, {"line": line}) for parent, child, line in dag.edges)
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        cycle = []
    if cycle:
        names = " -> ".join([edge[0] for edge in cycle] + [cycle[0][0]])
        line = max(graph.edges[edge[0], edge[1]]["line"] for edge in cycle)
        problems.append(Problem(file, line, f"cycle: {names}"))
    return sorted(problems, key=lambda p: (p.file, p.line))


def dag_files(target: Path) -> list[Path]:
    """The .dag files a lint target names: the file itself, or every *.dag in a directory."""
    target = Path(target)
    if target.is_dir():
        return sorted(target.glob("*.dag"))
    return [target]
