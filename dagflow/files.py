"""Files dagflow writes: atomic replacement (readers see the old file or the new one, never a half-written
one), and names as file names (`file_stem`: node names become log, script and verdict file names).

Standard library only, and light to import: the local engine's keeper (run with `python -I -S`) loads this
file by its path as it starts, and every run's first node waits for that start. So write_atomic and
file_stem import tempfile, pathlib and hashlib (about 10 ms together) where they use them.
"""

from __future__ import annotations

import os


def write_atomic(path: os.PathLike[str] | str, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` through a temporary file in the same directory and a rename.

    The temporary file is created with `mode` already set (mkstemp makes it 0600), so a secret is
    never readable by others, not even briefly.
    """
    import tempfile
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


# NAME_MAX is 255 bytes; what is kept leaves room for what is put around a stem: `.out`, `.json`,
# `<submission>-... .sh`, and write_atomic's `.<name>.XXXXXXXX.tmp`.
MAX_STEM_BYTES = 200
_DIGEST_CHARS = 16


def file_stem(name: str) -> str:
    """`name` itself when a file name can hold it with a suffix, else its first bytes, `-` and a sha256 prefix.

    A matrix value has no length limit, so a node name can pass the 255 bytes a file name may hold; one
    that is too long, or one no file name can be (`/`, NUL, `.`, `..`), is cut and given a hash of the
    whole name, so distinct names stay distinct files and nothing fails with `File name too long`. Every
    engine's writers and readers of per-node files go through here.
    """
    encoded = os.fsencode(name)
    if len(encoded) <= MAX_STEM_BYTES and b"/" not in encoded and b"\0" not in encoded and name not in ("", ".", ".."):
        return name
    import hashlib

    digest = hashlib.sha256(encoded).hexdigest()[:_DIGEST_CHARS]
    kept = encoded[: MAX_STEM_BYTES - _DIGEST_CHARS - 1].replace(b"/", b"_").replace(b"\0", b"_")
    return f"{kept.decode('utf-8', 'ignore')}-{digest}"
