"""The default optimiser: a Gaussian process with expected improvement, batch-aware.

- The first `initial` points come from a scrambled Sobol design (space-filling, deterministic per seed).
- After that each suggestion maximises log EI under a GP fitted to every observation.
- Failed trials enter the GP with the worst observed loss, so the model steers away from regions
  that fail, and they are never suggested again.
- Pending trials and the points already chosen for this batch enter as "kriging believer"
  fantasies: their value is the GP's own mean there, which leaves the mean unchanged but collapses
  the variance, so EI moves elsewhere.
- In a batch (more than one point in flight) one point goes to pure exploitation, the posterior
  mean's minimiser, before EI fills the rest.
- In a batch of n points, n // 2 of them are Thompson samples: each the minimiser, over a candidate
  set, of an independent joint draw from the posterior (see GPEI._thompson).
- One point at a time with up to 3 others running (a scheduler's `parallel: 4`), once there are 5
  observations per input: consecutive suggestions share out those roles as one batch would, by the
  point's ordinal (suggestion_roles).
- Losses are power-warped before the GP sees them (see gp.PowerWarp).
- With a known budget (the scheduler passes its own), the last points refine the incumbent: EI within a
  box of half a length scale around it (see FINAL_FRACTION, final_phase). Constrained EI does the same
  around the best feasible point once there is one.
- A Spearmint likelihood picks the noise model (gp.NOISE_MODELS): GAUSSIAN learns a noise term and takes
  the incumbent as the lowest posterior mean at an observed point, not the luckiest draw; NOISELESS fixes a
  near-zero nugget. The warp stays on under GAUSSIAN too, although it bends Gaussian noise out of shape:
  a skewed objective's low region is where the noise has to be told apart from the signal, and the warp
  gives it the GP's resolution (Branin + noise of sd 10, 8 seeds, 40 evaluations: median regret of the
  reported best 4.2 without the warp, 1.4 with it; without it the model smoothed Branin's valley into a
  minimum on the x2 = 0 boundary, true regret about 5, and spent the last evaluations there).
- Constraints (Spearmint's CONSTRAINT tasks, feasible where the value is >= 0): one GP per constraint,
  and each suggestion maximises log EI + the log probability of feasibility (constrained EI, Gelbart,
  Snoek and Adams 2014); EI counts improvement over the best feasible point, and while none is known
  the probability of feasibility alone is maximised. Pending points are fantasised in every model; the
  batch extras (exploitation point, Thompson samples) are left out.
- A NaN objective (Observation.objective_nan) marks its point infeasible, not failed, as HIPS Spearmint's
  add_nan_task_if_nans does: once one is observed, an implicit constraint joins the constrained EI above,
  a GP on +1 where the objective was a number and -1 where it was NaN (feasible where >= 0, as every
  constraint), and the objective's GP is fitted without the NaN points (HIPS leaves them out of the
  objective's task too). HIPS models that task with a GP classifier (a probit likelihood); dagflow has
  no classifier, and a GP regression on the +-1 labels gives constrained EI what it needs, a probability
  of feasibility that falls off across the NaN region's boundary, from the same machinery (and with the
  same prior mean, the labels' median) as every other constraint. Its noise is learned (GAUSSIAN): the
  labels are a step that a smooth GP cannot interpolate exactly, and the noise term plays the part of
  the classifier's probit. HIPS's constrained example with its NaN box on (branin_con.py: NaN outside
  0 <= x <= 5, y <= 5; 11% of the domain is a number), 25 evaluations, 15 seeds: best feasible within 3%
  of the constrained minimum 0.8447 on 13 seeds with the learned noise, 11 with a noiseless GP. Until
  two points have a number the objective has no model and the probability of not being NaN alone is
  maximised: an experiment whose design points land in its NaN region moves out of it instead of
  drawing more design points.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import qmc

from dagflow.search.acquisition import (
    Box,
    log_ei,
    log_ei_with_gradient,
    log_feasibility,
    log_feasibility_with_gradient,
    maximise,
    maximise_log_ei,
    minimise_mean,
)
from dagflow.search.gp import NOISE_MODELS, GPModel, Standardiser, fit_gp
from dagflow.search.optimizer import Observation, Taken, fill_random, rng_for, single_threaded
from dagflow.search.space import Params, SearchSpace

# The exploitation point is skipped when it is a point already taken. While other trials are still
# running (a scheduler asking for one point at a time as slots free up), it is also skipped when a taken
# point is this close (max-norm, unit cube): otherwise nearly every suggestion becomes one more small
# step next to the previous one (a8, Branin, 30 seeds: median regret at 40 evaluations 3.3e-4 with this
# radius, 6.8e-4 without). A fresh batch has no such radius: the mean's minimiser moves by less than
# 1e-3 late in a search, and at that scale Branin's regret is still around 1e-4 (b8, 80 seeds: 1e-3
# radius 1.1e-4, none 5.9e-5; b4, 80 seeds: 5.8e-5 and 2.0e-5; Hartmann6 unchanged).
ASYNC_EXPLOIT_RADIUS = 1e-3
# ... or when a pending or chosen point is this close, per input in units of its length scale: its
# result will soon tell the model about the minimiser. With 8 in flight the 1e-3 radius let nearly every
# suggestion be another exploitation point next to the pending ones: a8, 10 seeds, median regret at
# 20 evaluations 1.45 -> 0.59 (Branin), 2.00 -> 1.72 (Hartmann6).
PENDING_EXPLOIT_RADIUS = 0.2
# A scheduler asks for one point each time a trial ends, with the others pending. Left to the rule above,
# those points were nearly all EI (Branin, 4 in flight: 29 of 35 model points EI, 6 exploitation points,
# no Thompson sample, as n // 2 is 0 for one point), while a batch of 4 spends one point on exploitation
# (no radius), two on Thompson samples and one on EI; the batch ended 3.3x better on Branin (median
# regret at 40 evaluations, 40 seeds: b4 1.3e-5, a4 4.4e-5). So with few trials in flight and enough
# observations, each new point takes the role a batch gives to the point of its ordinal (see
# suggestion_roles), its exploitation point without either radius: a4 Branin 4.4e-5 -> 2.5e-5 (with
# the radii kept 8.6e-5; Thompson samples on every other ordinal instead, 1.3e-4). Not earlier than this
# many observations per input: in Hartmann6's 6 dimensions, 40 evaluations are too few for the draws and
# the mean's minimiser to pay (a4 Hartmann6, 30 seeds: 0.029 before, 0.026 with this gate, 0.14 without).
# Through the real scheduler (benchmarks/search.py, scheduler p4, 60 seeds): Branin 2.7e-5, Hartmann6 0.023,
# 1.5x and 1.8x the batch of 4 (Branin before: 4.6e-5, 3.5x).
ASYNC_ROLES_PER_INPUT = 5
# ... nor with more trials in flight than this: with 8 the roles made Branin worse at every gate tried
# (a8, 30 seeds: 3.3e-4 without them, 6.2e-4 to 1.1e-3 with them from 24, 16 or 10 observations on).
ASYNC_ROLES_MAX_IN_FLIGHT = 4
# Thompson-sample candidates: a Sobol design of 2**THOMPSON_SOBOL_POWER points plus this many around
# each of two scales of the best points so far; the joint draw costs O(m^3) in their number m.
THOMPSON_SOBOL_POWER = 10
THOMPSON_LOCAL = 256
# With a known budget (the scheduler's), the last points refine the incumbent: EI maximised only within a
# box around the best point so far, FINAL_BOX length scales each way per input (at most half the cube).
# With no later point left to profit from what exploration finds, EI's far bets (other basins, the
# boundary) are dropped for small steps where the best value is. How many points: FINAL_FRACTION of the
# budget, plus the trials in flight beside the one being chosen (a point chosen with k - 1 others running
# cannot use their results, so a phase of f + k - 1 points leaves f of them choosing with the phase's
# earlier results known). Measured in final_phase's docstring.
FINAL_FRACTION = 0.2
FINAL_BOX = 0.5


class GPEI:
    def __init__(
        self,
        space: SearchSpace,
        seed: int = 0,
        initial: int | None = None,
        candidates: int = 2048,
        starts: int = 8,
        restarts: int = 2,
        likelihood: str | None = None,
        constraints: Mapping[str, str | None] | None = None,
        budget: int | None = None,
        failures_spend_budget: bool = True,
    ) -> None:
        self.space = space
        # The trials the search will run in all, when known: the last of them refine (see FINAL_FRACTION).
        # Failed ones (value None) count against it unless failures_spend_budget is False (Spearmint's way).
        self.budget = budget
        self.failures_spend_budget = failures_spend_budget
        self.likelihood = likelihood
        self.constraints = dict(constraints or {})
        self.seed = seed
        self.initial = initial if initial is not None else max(5, min(10, space.dim + 1))
        self.candidates = candidates
        self.starts = starts
        self.restarts = restarts

    def suggest(
        self, n: int, observations: Sequence[Observation], pending: Sequence[Mapping[str, Any]] = ()
    ) -> list[Params]:
        with single_threaded():
            rows = self._suggest(n, observations, pending)
        return [self.space.decode(row) for row in rows]

    def _suggest(
        self, n: int, observations: Sequence[Observation], pending: Sequence[Mapping[str, Any]]
    ) -> list[np.ndarray]:
        space = self.space
        rng = rng_for(self.seed, observations, pending)
        observed = space.snap(space.encode_many([o.params for o in observations]))
        pending_x = space.snap(space.encode_many(list(pending)))
        taken = Taken(space.dim)
        taken.add(observed)
        taken.add(pending_x)

        failed = np.array([o.failed for o in observations], dtype=bool)
        nan = np.array([o.objective_nan for o in observations], dtype=bool)
        # NaN points are observations too: the implicit constraint models them (see the module's docstring)
        can_model = (~failed).sum() >= 2 or (nan.any() and (~failed | nan).sum() >= 2)
        # Without a model the whole request comes from the design: a first batch of 8 is 8 Sobol points.
        design_size = self.initial if can_model else max(self.initial, len(observations) + len(pending) + n)
        chosen = self._initial_points(n, len(observations) + len(pending), design_size, taken)
        if len(chosen) < n and can_model and (self.constraints or nan.any()):
            inflight = np.vstack([pending_x, *chosen]) if chosen else pending_x
            final = self._final_count(observations, len(pending_x) + len(chosen), n - len(chosen), len(pending_x) + n)
            chosen += self._constrained(n - len(chosen), observations, observed, inflight, taken, rng, final)
        elif len(chosen) < n and can_model:
            y = np.array([np.nan if o.failed else float(o.value) for o in observations])  # type: ignore[arg-type]
            y[failed] = np.nanmax(y)
            model, best, incumbent = self._objective_model(observed, y, ~failed, rng)
            inflight = np.vstack([pending_x, *chosen]) if chosen else pending_x
            if len(inflight):
                model, best = self._fantasise(model, best, inflight)
            good_x, good_y = observed[~failed], y[~failed]
            # the last `final` points of the request refine the incumbent; the others are chosen as usual
            final = self._final_count(observations, len(pending_x) + len(chosen), n - len(chosen), len(pending_x) + n)
            usual = n - final
            roles = suggestion_roles(usual, len(observations), len(pending_x), space.dim)
            if roles.exploit and len(chosen) < usual:
                model, best = self._add_exploitation_point(
                    model, best, good_x, good_y, taken, inflight, chosen, rng, roles.taken_radius, roles.pending_radius
                )
            count = min(roles.thompson, usual - len(chosen))
            samples = self._thompson(model, good_x, good_y, taken, chosen, count, rng)
            if samples:
                chosen.extend(samples)
                model, best = self._fantasise(model, best, np.vstack(samples))
            while len(chosen) < n:
                if len(chosen) < usual:
                    row = self._maximise(model, best, good_x, good_y, taken, rng)
                else:
                    row = self._refine(model, best, incumbent, good_x, good_y, taken, rng)
                if row is None:
                    break
                taken.add(row)
                chosen.append(row)
                model, best = self._fantasise(model, best, row[None, :])
        if len(chosen) < n:
            chosen.extend(fill_random(space, taken, rng, n - len(chosen)))
        return chosen

    def _objective_model(
        self, x: np.ndarray, y: np.ndarray, incumbents: np.ndarray, rng: np.random.Generator
    ) -> tuple[GPModel, float, np.ndarray]:
        """The objective's GP, and the incumbent among the rows marked incumbents: its value in standardised
        units and its point."""
        noisy = self.likelihood == "GAUSSIAN"
        standardise = Standardiser.of(y)
        model, _ = fit_gp(x, y, rng, self.restarts, NOISE_MODELS[self.likelihood], standardise)
        # the draws are noisy: the incumbent is the model's best guess at an observed point
        values = model.predict(x[incumbents])[0] if noisy else standardise(y[incumbents])
        lowest = int(np.argmin(values))
        return model, float(values[lowest]), x[incumbents][lowest]

    def _final_count(self, observations: Sequence[Observation], issued: int, wanted: int, in_flight: int) -> int:
        """How many of the next `wanted` points fall in the budget's final phase (see FINAL_FRACTION), with
        `issued` points pending or chosen already and `in_flight` trials running once these are added."""
        if self.budget is None:
            return 0
        spent = issued + sum(1 for o in observations if self.failures_spend_budget or o.value is not None)
        start = self.budget - final_phase(self.budget, in_flight)
        return max(0, min(wanted, spent + wanted - start))

    def _refine(
        self,
        model: GPModel,
        best: float,
        incumbent: np.ndarray,
        good_x: np.ndarray,
        good_y: np.ndarray,
        taken: Taken,
        rng: np.random.Generator,
    ) -> np.ndarray | None:
        """A final-phase point: EI's maximiser within the box around the incumbent (global EI where every
        point of the box is taken, as in a small discrete space)."""
        box = self._box(incumbent, model.length_scales)
        points, _ = maximise_log_ei(model, best, self._box_candidates(incumbent, box, rng), self.starts, box=box)
        row = self._first_free(model, best, points, taken)
        return row if row is not None else self._maximise(model, best, good_x, good_y, taken, rng)

    @staticmethod
    def _box(centre: np.ndarray, length_scales: np.ndarray) -> Box:
        half = np.minimum(FINAL_BOX * length_scales, 0.5)
        return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)

    def _box_candidates(self, centre: np.ndarray, box: Box, rng: np.random.Generator) -> np.ndarray:
        """Uniform points of the box, and points close around its centre (as _candidates does around the best)."""
        lower, upper = box
        uniform = lower + rng.random((self.candidates, self.space.dim)) * (upper - lower)
        return np.vstack([uniform, np.clip(_around(centre[None, :], self.candidates // 8, rng), lower, upper)])

    def _constrained(
        self,
        n: int,
        observations: Sequence[Observation],
        observed: np.ndarray,
        inflight: np.ndarray,
        taken: Taken,
        rng: np.random.Generator,
        final: int = 0,
    ) -> list[np.ndarray]:
        """n points by constrained EI, each fantasised (in every model) before the next is chosen. The
        implicit NaN constraint is one of the constraints once a NaN objective was observed. The last
        `final` of them refine: constrained EI within the box around the best feasible point, once there is one."""
        nan = np.array([o.objective_nan for o in observations], dtype=bool)
        failed = np.array([o.failed for o in observations], dtype=bool) & ~nan  # failed for real
        numbers = ~failed & ~nan
        feasible = np.array([o.feasible for o in observations], dtype=bool)
        y = np.array([float(o.value) if numbers[i] else np.nan for i, o in enumerate(observations)])  # type: ignore[arg-type]
        objective: GPModel | None = None
        incumbent: float | None = None
        region: tuple[np.ndarray, Box] | None = None  # the final phase's: the incumbent and its box
        if numbers.sum() >= 2:
            y[failed] = np.nanmax(y)
            fit = ~nan  # HIPS leaves the NaN points out of the objective's model
            incumbents = (feasible if feasible.any() else numbers)[fit]
            objective, best, point = self._objective_model(observed[fit], y[fit], incumbents, rng)
            if feasible.any():
                incumbent, region = best, (point, self._box(point, objective.length_scales))
        models = [self._constraint_model(name, observations, observed, rng) for name in self.constraints]
        if nan.any():
            models.append(self._nan_model(nan, numbers, observed, rng))
        constraints = [model for model in models if model is not None]
        around = feasible if feasible.any() else numbers if numbers.any() else ~failed
        chosen: list[np.ndarray] = []
        for index in range(n):
            if len(inflight):
                if objective is not None:
                    objective = objective.condition(inflight, objective.predict(inflight)[0])
                constraints = [(m.condition(inflight, m.predict(inflight)[0]), t) for m, t in constraints]
            refine = region if index >= n - final else None
            row = self._maximise_constrained(
                objective, constraints, incumbent, observed[around], y[around], taken, rng, refine
            )
            if row is None:
                break
            taken.add(row)
            chosen.append(row)
            inflight = row[None, :]
        return chosen

    def _constraint_model(
        self, name: str, observations: Sequence[Observation], observed: np.ndarray, rng: np.random.Generator
    ) -> tuple[GPModel, float] | None:
        """A constraint's GP on its observed values and the feasibility threshold (0) in its units; None
        while fewer than two values are known (a NaN job's constraint values count: it completed)."""
        values = np.array([
            np.nan if o.failed and not o.objective_nan else (o.outputs or {}).get(name, np.nan) for o in observations
        ])
        known = np.isfinite(values)
        if known.sum() < 2:
            return None
        standardise = Standardiser.of(values[known], warp=False, percentile=50.0)
        noise = NOISE_MODELS[self.constraints[name]]
        model, _ = fit_gp(observed[known], values[known], rng, self.restarts, noise, standardise)
        return model, float(standardise(np.array([0.0]))[0])

    def _nan_model(
        self, nan: np.ndarray, numbers: np.ndarray, observed: np.ndarray, rng: np.random.Generator
    ) -> tuple[GPModel, float]:
        """The implicit NaN constraint (HIPS's add_nan_task_if_nans): a GP on +1 where the objective was a
        number and -1 where it was NaN, feasible where >= 0 (see the module's docstring for the choices)."""
        rows = nan | numbers
        labels = np.where(nan[rows], -1.0, 1.0)
        standardise = Standardiser.of(labels, warp=False, percentile=50.0)
        model, _ = fit_gp(observed[rows], labels, rng, self.restarts, NOISE_MODELS["GAUSSIAN"], standardise)
        return model, float(standardise(np.array([0.0]))[0])

    def _maximise_constrained(
        self,
        objective: GPModel | None,
        constraints: list[tuple[GPModel, float]],
        best: float | None,
        good_x: np.ndarray,
        good_y: np.ndarray,
        taken: Taken,
        rng: np.random.Generator,
        region: tuple[np.ndarray, Box] | None = None,
    ) -> np.ndarray | None:
        """The constrained EI's maximiser; in a final-phase region (a centre and its box), within the box
        (anywhere where every point of the box is taken)."""

        def score(rows: np.ndarray) -> np.ndarray:
            total = sum((log_feasibility(m, rows, t) for m, t in constraints), np.zeros(len(rows)))
            return total + log_ei(objective, rows, best) if objective is not None and best is not None else total

        def score_with_gradient(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            parts = [log_feasibility_with_gradient(m, rows, t) for m, t in constraints]
            if objective is not None and best is not None:
                parts.append(log_ei_with_gradient(objective, rows, best))
            if not parts:  # nothing modelled yet: every point scores alike
                return np.zeros(len(rows)), np.zeros(rows.shape)
            return sum(p[0] for p in parts), sum(p[1] for p in parts)  # type: ignore[return-value]

        if region is None:
            points, _ = maximise(score, score_with_gradient, self._candidates(good_x, good_y, rng), self.starts)
        else:
            candidates = self._box_candidates(*region, rng)
            points, _ = maximise(score, score_with_gradient, candidates, self.starts, box=region[1])
        points = self.space.snap(points)
        if self.space.discrete.any():
            points = points[np.argsort(-score(points), kind="stable")]
        free = ~taken.mask(points)
        if free.any():
            return points[int(np.argmax(free))]
        if region is not None:
            return self._maximise_constrained(objective, constraints, best, good_x, good_y, taken, rng)
        return None

    @staticmethod
    def _fantasise(model: GPModel, best: float, points: np.ndarray) -> tuple[GPModel, float]:
        """The model and incumbent as if the points had been observed at the GP's own mean (kriging
        believer). Measured against constant liars (the worst, or the best, observed value at every
        pending point) and a believer clipped at the incumbent, in batches of 8 and with 8 in flight:
        the worst-value liar was far behind everywhere, the others traded wins on Branin, and the
        plain believer was best on Hartmann6."""
        believed = model.predict(points)[0]
        # A believed value below the incumbent becomes the incumbent, or EI would stay high at that very point.
        return model.condition(points, believed), min(best, float(believed.min()))

    def _initial_points(self, n: int, issued: int, design_size: int, taken: Taken) -> list[np.ndarray]:
        """Points issued..issued+n of the seed's Sobol design, as far as it reaches design_size."""
        wanted = min(n, design_size - issued)
        if wanted <= 0:
            return []
        power = int(np.ceil(np.log2(max(2, design_size))))
        design = self.space.snap(qmc.Sobol(self.space.dim, scramble=True, seed=self.seed).random_base2(power))
        chosen = []
        for row in design[issued : issued + wanted]:
            if row not in taken:
                taken.add(row)
                chosen.append(row)
        return chosen

    def _maximise(
        self,
        model: GPModel,
        best: float,
        good_x: np.ndarray,
        good_y: np.ndarray,
        taken: Taken,
        rng: np.random.Generator,
    ) -> np.ndarray | None:
        points, _ = maximise_log_ei(model, best, self._candidates(good_x, good_y, rng), self.starts)
        return self._first_free(model, best, points, taken)

    def _first_free(self, model: GPModel, best: float, points: np.ndarray, taken: Taken) -> np.ndarray | None:
        """The first of the points (best log EI first) not taken, snapped first in a discrete space."""
        if self.space.discrete.any():
            points = self.space.snap(points)
            points = points[np.argsort(-log_ei(model, points, best), kind="stable")]
        free = ~taken.mask(points)
        if not free.any():
            return None
        return points[int(np.argmax(free))]

    def _candidates(self, good_x: np.ndarray, good_y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Uniform random points, and points around the best ones found so far (the acquisition's
        optimum is often close to them): the starts for gradient polishing are picked among these."""
        uniform = rng.random((self.candidates, self.space.dim))
        return np.vstack([uniform, _around(_best_four(good_x, good_y), self.candidates // 8, rng)])

    def _add_exploitation_point(
        self,
        model: GPModel,
        best: float,
        good_x: np.ndarray,
        good_y: np.ndarray,
        taken: Taken,
        inflight: np.ndarray,
        chosen: list[np.ndarray],
        rng: np.random.Generator,
        taken_radius: float = 0.0,
        pending_radius: float = PENDING_EXPLOIT_RADIUS,
    ) -> tuple[GPModel, float]:
        """Spend one point of a batch on pure exploitation: the posterior mean's minimiser, unless an
        observed, pending or chosen point is already there (or within taken_radius of it). EI under
        kriging-believer fantasies spreads a batch out, which leaves few points to refine the best
        region; Branin, batches of 8, 50 seeds: median regret at 40 evaluations 2.4e-4 without this
        point, 1.3e-4 with it."""
        point, _ = minimise_mean(model, self._candidates(good_x, good_y, rng))
        point = self.space.snap(point)[0]
        if (
            point in taken
            or taken.near(point, taken_radius)
            or _near(inflight, point, pending_radius * model.length_scales)
        ):
            return model, best
        taken.add(point)
        chosen.append(point)
        return self._fantasise(model, best, point[None, :])

    def _thompson(
        self,
        model: GPModel,
        good_x: np.ndarray,
        good_y: np.ndarray,
        taken: Taken,
        chosen: list[np.ndarray],
        count: int,
        rng: np.random.Generator,
    ) -> list[np.ndarray]:
        """Up to count batch points, each the minimiser of its own joint posterior draw over one
        candidate set. EI under believer fantasies spreads a batch by construction; posterior draws
        spread it only as far as the model is unsure, so late batches crowd the likely optimum.
        Batches of 8, median regret at 40 evaluations: Branin (30 seeds) 2.5e-4 -> 8.9e-5 with half
        the batch drawn this way, 7.9e-5 with all of it; Hartmann6 (20 seeds) 0.136 -> 0.137 with
        half, but 0.18 -> 0.32 (10 seeds) with all of it: in 6 dimensions the draws' minimisers are
        coarse and spread, so EI keeps the other half."""
        if count <= 0:
            return []
        points = self._thompson_candidates(good_x, good_y, chosen, rng)
        out: list[np.ndarray] = []
        for draw in model.sample(points, count, rng):
            ranked = points[np.argsort(draw)]
            free = ~taken.mask(ranked)
            if free.any():
                row = ranked[int(np.argmax(free))]
                taken.add(row)
                out.append(row)
        return out

    def _thompson_candidates(
        self, good_x: np.ndarray, good_y: np.ndarray, chosen: list[np.ndarray], rng: np.random.Generator
    ) -> np.ndarray:
        """A fresh Sobol design, and points around the best observed and the already chosen points
        (the draws' minimisers, late in a search, sit close to them)."""
        sobol = qmc.Sobol(self.space.dim, scramble=True, seed=rng).random_base2(THOMPSON_SOBOL_POWER)
        centres = np.vstack([_best_four(good_x, good_y), *chosen])
        return self.space.snap(np.vstack([sobol, _around(centres, THOMPSON_LOCAL, rng)]))


@dataclass(frozen=True, slots=True)
class Roles:
    """How the model-based points of one suggestion are chosen: whether one of them is the posterior
    mean's minimiser (skipped within taken_radius of a taken point, or pending_radius length scales of
    an in-flight one), and how many are Thompson samples; EI chooses the rest."""

    exploit: bool
    thompson: int
    taken_radius: float
    pending_radius: float


def final_phase(budget: int, in_flight: int = 1) -> int:
    """How many of a budget's last points refine the incumbent, with in_flight trials running at a time
    (see FINAL_FRACTION). HIPS Spearmint's Branin examples run as written, 25 evaluations, seeds within 1%
    of the minimum 0.397887, before -> after: simple (NOISELESS, one at a time, 24 seeds) 19/24 -> 24/24,
    median 0.39952 -> 0.39798, worst 0.4177 -> 0.3993; distributed (NOISELESS, 4 in flight) finishing in
    trial order 14/24 -> 19/24, in random order (3 orders of 24 seeds) 48/72 -> 64/72, with its jobs' random
    sleeps (6 orders of 24 seeds) 96/144 -> 115/144: most misses left there find a minimum's basin late,
    in the search before this phase (seed 1: 13 of 16 orders miss before, 12 after); Jasper's braninpy
    (GAUSSIAN, 12 seeds) 12/12 both, median 0.39845 -> 0.39797; constrained (12 seeds) best feasible
    within 1% of 0.8447 on 12/12 both, with its NaN box median 0.8496 -> 0.8454. Alternatives, same runs
    (simple, distributed in trial order, in random order): a box of 0.25 length scales 24/24, 17/24,
    60/72; the posterior mean's minimiser in a 0.25 box (EI where a point is there already) 23/24, 17/24;
    no in-flight term (0.2 of the budget alone, 0.25 box) in random order 18/24 against 21/24 on one order.
    Median regret at 40 evaluations (benchmarks/search.py's problems, 12 seeds): Branin one at a time
    4.9e-5 -> 1.8e-5, 4 in flight 2.4e-5 -> 1.4e-5; Hartmann6 one at a time unchanged (in 6 inputs the box
    holds EI's maximiser anyway), 4 in flight (42 seeds) 0.022 -> 0.019, better on 21, worse on 15."""
    return max(1, int(np.ceil(FINAL_FRACTION * budget))) + max(in_flight, 1) - 1


def suggestion_roles(n: int, observed: int, pending: int, dim: int) -> Roles:
    """The roles of n new points given the observed and pending counts (see ASYNC_ROLES_PER_INPUT)."""
    if not pending:
        return Roles(n >= 2, n // 2, 0.0, PENDING_EXPLOIT_RADIUS)
    in_flight = pending + n
    if in_flight > ASYNC_ROLES_MAX_IN_FLIGHT or observed < ASYNC_ROLES_PER_INPUT * dim:
        return Roles(True, n // 2, ASYNC_EXPLOIT_RADIUS, PENDING_EXPLOIT_RADIUS)
    # The optimiser keeps no record of how earlier points were chosen: a point's ordinal, counted over every
    # observed and pending point, fixes its role within each run of in_flight consecutive points, so the
    # points in flight share out the roles as one batch would: ordinal 0 exploits, the next half are
    # Thompson samples, the rest EI.
    ordinals = [(observed + pending + k) % in_flight for k in range(n)]
    return Roles(0 in ordinals, sum(1 for o in ordinals if 1 <= o <= in_flight // 2), 0.0, 0.0)


def recommend(
    space: SearchSpace, observations: Sequence[Observation], likelihood: str | None = None, seed: int = 0
) -> int | None:
    """The index of the observation to report as the search's best: among feasible ones, the lowest loss,
    or, for a GAUSSIAN likelihood, the lowest posterior mean (Spearmint's way: a noisy search's lowest
    draw is mostly luck). None when no observation is feasible."""
    chosen = recommend_with_mean(space, observations, likelihood, seed)
    return None if chosen is None else chosen[0]


def recommend_with_mean(
    space: SearchSpace, observations: Sequence[Observation], likelihood: str | None = None, seed: int = 0
) -> tuple[int, float | None] | None:
    """recommend's index, and the posterior mean there in the losses' own units (the warp and the
    standardisation undone) where the GP chose it; None for the mean where the lowest loss did."""
    feasible = [index for index, o in enumerate(observations) if o.feasible]
    if not feasible:
        return None
    good = [index for index, o in enumerate(observations) if not o.failed]
    if likelihood != "GAUSSIAN" or len(good) < 3:
        return min(feasible, key=lambda i: (float(observations[i].value), i)), None  # type: ignore[arg-type]
    with single_threaded():
        x = space.snap(space.encode_many([observations[i].params for i in good]))
        y = np.array([float(observations[i].value) for i in good])  # type: ignore[arg-type]
        rng = rng_for(seed, observations, ())
        standardise = Standardiser.of(y)
        model, _ = fit_gp(x, y, rng, noise=NOISE_MODELS["GAUSSIAN"], standardise=standardise)
        means = model.predict(space.snap(space.encode_many([observations[i].params for i in feasible])))[0]
    lowest = int(np.argmin(means))
    return feasible[lowest], float(standardise.inverse(means[lowest : lowest + 1])[0])


def _best_four(good_x: np.ndarray, good_y: np.ndarray) -> np.ndarray:
    return good_x[np.argsort(good_y)[:4]]


def _around(centres: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """count points at each of two scales (0.01 and 0.1 of the unit cube) around randomly picked
    centres, clipped to the cube: where acquisition optima and posterior draws' minimisers sit late on."""
    shape = (count, centres.shape[1])
    return np.clip(
        np.vstack([
            centres[rng.integers(len(centres), size=count)] + rng.normal(0.0, scale, shape) for scale in (0.01, 0.1)
        ]),
        0.0,
        1.0,
    )


def _near(points: np.ndarray, unit: np.ndarray, radii: np.ndarray) -> bool:
    """Whether a row of points lies within radii of unit in every input."""
    return bool(len(points)) and bool((np.abs(points - unit) < radii).all(axis=1).any())
