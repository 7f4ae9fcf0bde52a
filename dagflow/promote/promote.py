"""`dagflow promote`: compare a new model's metric with the current model's and, only when it is
better, move the `latest` pointer to the new model.

The pointer is one small JSON object (or file) naming the current model and its metrics. It is written
last, in one atomic write (a single conditional S3 PUT, or a rename under a lock), after the model is
published, so a reader either sees the old model or the complete new one, and of racing promotions
the best model wins.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from dagflow.bounded import BoundedInputError, loads_json
from dagflow.promote.decide import (
    FAILED,
    PROMOTED,
    PromotionInputError,
    decide,
    metric_value,
    read_metrics,
)
from dagflow.promote.store import PointerConflict, Store
from dagflow.run.promotions import Verdict
from dagflow.transfer.s3client import S3TransferError

POINTER_FORMAT = 1


@dataclass(frozen=True, slots=True)
class Request:
    metrics: str  # the evaluate node's metrics file
    metric: str
    better: str  # lower | higher
    pointer: str  # e.g. s3://bucket/models/us/latest
    model: str  # the published model, e.g. s3://bucket/models/us/<run-id>/
    run_id: str
    node: str
    min_delta: float = 0.0


MAX_ATTEMPTS = 50  # compare-and-swap rounds; each lost round means another promotion moved the pointer


class PointerBusyError(S3TransferError):
    """Other promotions kept moving the pointer: worth a retry (exit 1)."""


def parse_pointer(raw: bytes | None, url: str) -> dict | None:
    if raw is None:
        return None
    try:
        data = loads_json(raw)
    except BoundedInputError:
        data = None
    if not isinstance(data, dict):
        raise PromotionInputError(f"the current pointer {url} is not a dagflow pointer (a JSON object)")
    return data


def promote(request: Request, store: Store | None = None) -> Verdict:
    """Decide and, when better, move the pointer. Raises on failure; the caller records it.

    The read, the comparison and the write are one compare-and-swap (see store.py): when another
    promotion moved the pointer in between, the write is refused and the decision is made again
    against the pointer it wrote, so the better model always ends as the pointer."""
    store = store or Store()
    metrics = read_metrics(request.metrics)
    new = metric_value(metrics, request.metric, f"metrics file {request.metrics}")
    if not store.has_content(request.model):
        raise PromotionInputError(f"the published model {request.model} is empty or missing")
    with store.locked(request.pointer):
        for _ in range(MAX_ATTEMPTS):
            try:
                return _compare_and_swap(request, store, metrics, new)
            except PointerConflict:
                continue
    raise PointerBusyError(f"the pointer {request.pointer} changed {MAX_ATTEMPTS} times while comparing; rerun")


def _compare_and_swap(request: Request, store: Store, metrics: dict, new: float) -> Verdict:
    seen = store.read_versioned(request.pointer)
    current = parse_pointer(seen.data, request.pointer)
    old = None
    if current is not None:
        old = metric_value(current.get("metrics") or {}, request.metric, f"current pointer {request.pointer}")
    decision = decide(new, old, request.metric, request.better, request.min_delta)
    if decision.verdict == PROMOTED:
        store.write_if_unchanged(request.pointer, _pointer_bytes(request, metrics, current), seen)
    return Verdict(
        node=request.node,
        verdict=decision.verdict,
        reason=decision.reason,
        metric=request.metric,
        better=request.better,
        new=new,
        old=old,
        model=request.model,
        pointer=request.pointer,
        run_id=request.run_id,
    )


def _pointer_bytes(request: Request, metrics: dict, current: dict | None) -> bytes:
    pointer = {
        "format": POINTER_FORMAT,
        "model": request.model,
        "run_id": request.run_id,
        "metric": request.metric,
        "better": request.better,
        "metrics": metrics,
        "previous": current.get("model") if current else None,
        "promoted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    return (json.dumps(pointer, indent=1, sort_keys=True) + "\n").encode()


def failed(request: Request, reason: str) -> Verdict:
    return Verdict(
        node=request.node,
        verdict=FAILED,
        reason=reason,
        metric=request.metric,
        better=request.better,
        model=request.model,
        pointer=request.pointer,
        run_id=request.run_id,
    )
