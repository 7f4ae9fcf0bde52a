"""A command word that names the node's own files: {inputs}, {outputs}, {inputs[0]}, {outputs[1]}.

A word that is just `{inputs}` becomes one argv word per path (no shell ever splits them), `{inputs[0]}`
alone the path itself. Inside a longer word (`sh -c 'cat {inputs} > {outputs[0]}'`) each path is
shell-quoted and a list joined by spaces, so a shell that reads the word sees each path as one word and
nothing in a path can run as a command.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from dagflow.spec.templates import FILE_VARIABLE, Template


def uses_files(template: Template) -> bool:
    return any(FILE_VARIABLE.match(name) for name in template.variables)


def file_words(template: Template, coords: Mapping[str, str], inputs: list[str], outputs: list[str]) -> list[str]:
    """The argv words template makes for a node with these coords and files."""
    files = {"inputs": inputs, "outputs": outputs}
    if len(template.parts) == 3 and template.parts[0] == template.parts[2] == "":
        whole = FILE_VARIABLE.match(template.parts[1])
        if whole is not None:
            paths = files[whole.group(1)]
            return list(paths) if whole.group(2) is None else [paths[int(whole.group(2))]]
    context = dict(coords)
    for name in template.variables:
        match = FILE_VARIABLE.match(name)
        if match is not None:
            paths = files[match.group(1)]
            chosen = paths if match.group(2) is None else [paths[int(match.group(2))]]
            context[name] = " ".join(shlex.quote(path) for path in chosen)
    return [template.render(context)]
