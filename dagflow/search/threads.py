"""Keep the numerical libraries on one thread while an optimiser works.

GP fits here are many small matrix operations; on a 2-core machine multi-threaded BLAS/OpenMP spent
more time synchronising than computing (about 10x slower, measured). The cap is applied at run time,
around each suggestion, rather than through OMP_NUM_THREADS in the environment: environment variables
act only before numpy is first imported, and they would leak into the trial processes a scheduler
starts, whose training code should keep every core.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def single_threaded() -> Iterator[None]:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield
