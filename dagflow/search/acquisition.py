"""Expected improvement, in log form, and its maximisation over the unit cube.

EI underflows to exactly zero far from the incumbent, which leaves a gradient optimiser on a flat
plateau late in a search; log EI (computed stably for very negative z) keeps a usable slope.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize
from scipy.special import erfcx, log_ndtr, ndtr

from dagflow.search.gp import GPModel

_SQRT_HALF_PI = np.sqrt(np.pi / 2.0)
_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
# A box inside the unit cube: its lower and its upper corner.
Box = tuple[np.ndarray, np.ndarray]


def _log_h(z: np.ndarray) -> np.ndarray:
    """log(phi(z) + z Phi(z)), stable for every z."""
    z = np.asarray(z, dtype=float)
    out = np.empty_like(z)
    big = z > -1.0
    zb = z[big]
    out[big] = np.log(np.exp(-0.5 * zb * zb) / np.sqrt(2 * np.pi) + zb * ndtr(zb))
    zs = np.maximum(z[~big], -1e6)
    # h(z) = phi(z) (1 - |z| Phi(z)/phi(z)); Phi(z)/phi(z) = sqrt(pi/2) erfcx(|z|/sqrt2)
    mills = _SQRT_HALF_PI * erfcx(-zs / np.sqrt(2.0))
    out[~big] = -0.5 * zs * zs - _LOG_SQRT_2PI + np.log1p(np.maximum(zs * mills, -1.0 + 1e-300))
    return out


def log_ei(model: GPModel, xq: np.ndarray, best: float) -> np.ndarray:
    mean, sd = model.predict(xq)
    return _log_h((best - mean) / sd) + np.log(sd)


def log_ei_with_gradient(model: GPModel, xq: np.ndarray, best: float) -> tuple[np.ndarray, np.ndarray]:
    mean, sd, dmean, dsd = model.predict_with_gradient(xq)
    z = (best - mean) / sd
    log_h = _log_h(z)
    # EI = sd h(z): dEI = -Phi(z) dmean + phi(z) dsd; divide by EI for the log
    ratio_cdf = np.exp(log_ndtr(z) - log_h)  # Phi(z) / h(z)
    ratio_pdf = np.exp(-0.5 * z * z - _LOG_SQRT_2PI - log_h)  # phi(z) / h(z)
    grad = (-ratio_cdf[:, None] * dmean + ratio_pdf[:, None] * dsd) / sd[:, None]
    return log_h + np.log(sd), grad


def maximise_log_ei(
    model: GPModel,
    best: float,
    candidates: np.ndarray,
    starts: int = 8,
    maxiter: int = 200,
    box: Box | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Score random candidates, polish the best `starts` of them with L-BFGS-B (all in one problem),
    and return every point (polished and candidates) with its log EI, best first. With a box (lower and
    upper corners inside the unit cube, the candidates inside it), the polishing stays inside the box."""
    return maximise(
        lambda rows: log_ei(model, rows, best), lambda rows: log_ei_with_gradient(model, rows, best), candidates,
        starts, maxiter, box,
    )  # fmt: skip


def maximise(
    score: Callable[[np.ndarray], np.ndarray],
    score_with_gradient: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    candidates: np.ndarray,
    starts: int = 8,
    maxiter: int = 200,
    box: Box | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Any acquisition: the candidates and the polished best `starts` of them, with their scores, best first."""
    scores = score(candidates)

    def negative(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, grad = score_with_gradient(rows)
        return -values, -grad

    polished = _polish(candidates[np.argsort(-scores)[:starts]], negative, maxiter, box)
    points = np.vstack([polished, candidates])
    values = np.concatenate([score(polished), scores])
    values[~np.isfinite(values)] = -np.inf
    order = np.argsort(-values, kind="stable")
    return points[order], values[order]


def log_feasibility(model: GPModel, xq: np.ndarray, threshold: float) -> np.ndarray:
    """log P(c(x) >= threshold) under a constraint's GP (standardised units)."""
    mean, sd = model.predict(xq)
    return log_ndtr((mean - threshold) / sd)


def log_feasibility_with_gradient(model: GPModel, xq: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    mean, sd, dmean, dsd = model.predict_with_gradient(xq)
    z = (mean - threshold) / sd
    log_cdf = log_ndtr(z)
    ratio = np.exp(-0.5 * z * z - _LOG_SQRT_2PI - log_cdf)  # phi(z) / Phi(z)
    dz = (dmean - z[:, None] * dsd) / sd[:, None]
    return log_cdf, ratio[:, None] * dz


def minimise_mean(
    model: GPModel, candidates: np.ndarray, starts: int = 4, maxiter: int = 200
) -> tuple[np.ndarray, float]:
    """The point of the unit cube where the posterior mean is lowest (pure exploitation), polished with
    L-BFGS-B from the `starts` candidates of lowest mean, and that mean."""

    def mean(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, _, grad, _ = model.predict_with_gradient(rows)
        return values, grad

    polished = _polish(candidates[np.argsort(model.predict(candidates)[0])[:starts]], mean, maxiter)
    means = model.predict(polished)[0]
    best = int(np.argmin(means))
    return polished[best], float(means[best])


def _polish(
    starts: np.ndarray,
    loss: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    maxiter: int,
    box: Box | None = None,
) -> np.ndarray:
    """Each start row moved downhill on loss (per-row values and their gradients) within the unit cube,
    or within the box.

    One L-BFGS-B problem for all starts (the objective is their sum, separable): one Python loop
    instead of one per start. Measured: the same regret as separate runs, in less time.
    """
    m, d = starts.shape
    lower, upper = box if box is not None else (np.zeros(d), np.ones(d))

    def objective(flat: np.ndarray) -> tuple[float, np.ndarray]:
        values, grad = loss(flat.reshape(-1, d))
        return float(values.sum()), grad.reshape(-1)

    bounds = list(zip(np.tile(lower, m), np.tile(upper, m), strict=True))
    result = minimize(
        objective, starts.reshape(-1), jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": maxiter}
    )
    return np.clip(result.x.reshape(m, d), lower, upper)
