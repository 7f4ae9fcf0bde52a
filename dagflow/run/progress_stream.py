"""Progress lines that reach the access point marked among other text: the contract between an engine
that streams a running node's metric lines (engines/condor/node.sh --progress writes them on the job's
stderr, which HTCondor's stream_error sends back while the job runs) and the reader of those lines
(search/progress.py). An engine names such a file as a StreamedFile; in it only lines after STREAM_MARKER
count, and a STREAM_START line marks each (re)start of the node, where its curve begins again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STREAM_MARKER = b"dagflow-progress: "  # node.sh writes the same words
STREAM_START = b"dagflow-progress-start: "


@dataclass(frozen=True, slots=True)
class StreamedFile:
    """A file where a running node's progress lines arrive marked among other text (its streamed stderr)."""

    path: Path
