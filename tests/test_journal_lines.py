"""read_journal reads a journal exactly as reading it line by line with json.loads does (the journal's own
lines are parsed in place in the file's text, others by json.loads): the same records, the same counts of
skipped and bad lines, on the journal's own lines mixed with hostile ones."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagflow.run.journal import JournalState, read_journal

OWN_LINES = [
    b'{"e":"run","pid":7,"resume":false,"t":1.5}',
    b'{"e":"start","n":"a","a":1,"pid":9,"t":2.0}',
    b'{"e":"start","n":"a","a":1,"t":2}',  # an int time
    b'{"e":"end","n":"a","a":1,"s":"succeeded","rc":0,"k":"k1","t":3.25}',
    b'{"e":"end","n":"b","s":"retry","rc":1,"why":"boom \\u00e9","t":4.0}',
    b'{"e":"end","n":"b","s":"checkpointed","rc":85,"t":4.5}',
    b'{"e":"cached","n":"c","k":"k2","t":5.0}',
    b'{"e":"upstream_failed","n":["d","e"],"by":"a","t":6.0}',
    b'{"e":"replan","n":["a","b"],"t":7.0}',
    b'{"e":"finish","s":"failed","t":8.0}',
]
HOSTILE_LINES = [
    b'{"e":"start","n":"a","a":1,"pid":true,"t":2.0}',  # a bool where an int goes
    b'{"e":"start","n":1,"t":2.0}',
    b'{"e":"end","n":"a","s":"won","t":3.0}',
    b'{"e":"end","n":"a","s":"failed","rc":1.5,"t":3.0}',
    b'{"e":"end","n":"a","s":"failed","why":["x"],"t":3.0}',
    b'{"e":"start","n":"a","t":"noon"}',
    b'{"e":"end","n":"a","s":"failed","t":"late"}',
    b'{"e":"cached","n":"a","k":5,"t":1.0}',
    b' {"e":"start","n":"a","t":2.0} ',  # spaces around a value json.loads takes
    b'{"e":"start","n":"a","t":2.0}\r',
    b'\xef\xbb\xbf{"e":"start","n":"bom","t":2.0}',  # json.loads of bytes skips a UTF-8 BOM
    b'{"e":"start","n":"a","t":2.0}{"e":"finish","s":"x","t":1}',  # two values on one line
    b'{"e":"finish","s":"succeeded","t":1},2',
    b"[3",
    b"4]",
    b'{"e":',
    b'"start"}',
    b"[]",
    b"17",
    b"null",
    b'{"e":"nope"}',
    b'{"e":"start","n":"\xc3\xa9","t":NaN}',
    b'{"e":"start","n":"torn","t":2.',
    b'{"e":"start","n":"\xff","t":2.0}',  # not UTF-8: the whole file is read line by line
    b'{"e":"start","n":"deep","t":2.0,"x":' + b"[" * 40 + b"]" * 40 + b"}",  # more brackets than in place
]


def by_lines(data: bytes) -> JournalState:
    """The reference: every line through json.loads, then JournalState.apply."""
    state = JournalState()
    for line in data.split(b"\n"):
        if not line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            state.skipped_lines += 1
            continue
        try:
            if not isinstance(event, dict):
                raise ValueError("not an object")
            state.apply(event)
        except ValueError:
            state.bad_lines += 1
    return state


def _same(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    assert asdict(read_journal(path)) == asdict(by_lines(data)), data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.sampled_from(OWN_LINES + HOSTILE_LINES) | st.binary(max_size=40), max_size=30),
    st.sampled_from([b"\n", b"\n\n"]),
    st.booleans(),
)
def test_a_journal_reads_as_its_lines_read_one_by_one(
    tmp_path: Path, lines: list[bytes], separator: bytes, newline_at_end: bool
) -> None:
    _same(tmp_path / "journal.jsonl", separator.join(lines) + (b"\n" if newline_at_end else b""))


def test_each_hostile_line_reads_as_json_loads_reads_it(tmp_path: Path) -> None:
    for hostile in HOSTILE_LINES:
        _same(tmp_path / "journal.jsonl", b"\n".join([*OWN_LINES, hostile, *OWN_LINES]) + b"\n")


def test_an_event_with_a_field_of_the_wrong_type_changes_nothing_and_is_counted_bad(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"\n".join(OWN_LINES) + b"\n")
    before = asdict(read_journal(path))
    for hostile in HOSTILE_LINES[:8]:  # well-formed JSON objects whose fields are not the event's types
        path.write_bytes(b"\n".join([*OWN_LINES, hostile]) + b"\n")
        assert asdict(read_journal(path)) == {**before, "bad_lines": 1}, hostile
