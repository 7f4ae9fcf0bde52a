"""The autoscaler's loop: observe, decide, act (or print, with --dry-run), remember, back off on errors."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dagflow.autoscale.cloud import AsgState, AutoScaling, CapacityError, CloudError, CredentialsError
from dagflow.autoscale.decide import CancelDrain, Decision, Drain, SetDesired, Terminate, decide
from dagflow.autoscale.demand import DemandSource, signatures
from dagflow.autoscale.matching import Matcher
from dagflow.autoscale.policy import Policy
from dagflow.autoscale.pool import Node, NodeState, PoolControl, PoolError, bind_instances
from dagflow.autoscale.report import render
from dagflow.autoscale.state import Removal, State, StateFile

log = logging.getLogger("dagflow.autoscale")
DRAIN_REASON = "dagflow-autoscale: idle, scaling in"
UNREAD_NOTE = "AWS not read, no credentials: every group taken as empty"


@dataclass
class LoopResult:
    decision: Decision
    done: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    report: str = ""


class Autoscaler:
    def __init__(
        self,
        policy: Policy,
        demand: DemandSource,
        pool: PoolControl,
        cloud: AutoScaling,
        state_file: StateFile,
        dry_run: bool = False,
        clock: Callable[[], float] = time.time,
        emit: Callable[[str], None] | None = None,
    ) -> None:
        self.policy = policy
        self.demand = demand
        self.pool = pool
        self.cloud = cloud
        self.state_file = state_file
        self.dry_run = dry_run
        self.clock = clock
        self.emit = emit or (lambda text: log.info("%s", text.rstrip()))
        self.matcher = Matcher(policy.groups)
        self.aws_unread: str | None = None  # why this loop's dry run could not read the groups from AWS

    def _groups_by_region(self) -> dict[str, list[str]]:
        regions: dict[str, list[str]] = {}
        for group in self.policy.groups:
            regions.setdefault(group.region, []).append(group.asg)
        return regions

    def observe_groups(self) -> dict[str, AsgState]:
        """Every group's state in AWS. A dry run without AWS credentials still decides, taking each group
        as empty: what the demand needs on new instances (matching and packing), and no scale-in, since
        no pool node can be tied to an instance."""
        try:
            return self._describe_groups()
        except CredentialsError as error:
            if not self.dry_run:
                raise
            self.aws_unread = str(error)
            log.warning("dry run without AWS: %s", error)
            return {g.name: AsgState.unknown(g.asg, g.region, g.max_size) for g in self.policy.groups}

    def _describe_groups(self) -> dict[str, AsgState]:
        by_asg: dict[tuple[str, str], AsgState] = {}
        for region, names in self._groups_by_region().items():
            for name, asg in self.cloud.describe(region, names).items():
                by_asg[(region, name)] = asg
        return {g.name: by_asg[(g.region, g.asg)] for g in self.policy.groups if (g.region, g.asg) in by_asg}

    def nodes(self, asgs: dict[str, AsgState]) -> list[Node]:
        """The pool's nodes, each bound to the instance the cloud has at the node's address."""
        by_ip = {
            instance.private_ip: instance.instance_id
            for asg in asgs.values()
            for instance in asg.live_instances()
            if instance.private_ip
        }
        return bind_instances(self.pool.nodes(), by_ip)

    def _capacity_failures(self, asgs: dict[str, AsgState], state: State, now: float, errors: list[str]) -> None:
        """Launches that failed for capacity show up in scaling activities, not as call errors."""
        timeout = self.policy.settings.capacity_timeout_s
        for group in self.policy.groups:
            asg = asgs.get(group.name)
            previous = state.capacity_timeouts.get(group.name, 0.0)
            if asg is None or previous > now or asg.desired <= len(asg.live_instances()):
                continue
            since = dt.datetime.fromtimestamp(max(now - timeout, previous), tz=dt.UTC)
            try:
                reason = self.cloud.recent_capacity_failure(group.region, group.asg, since)
            except CloudError as error:
                errors.append(str(error))
                continue
            if reason:
                self._time_out(state, group.name, now, reason)

    def _time_out(self, state: State, group: str, now: float, reason: str) -> None:
        state.capacity_timeouts[group] = now + self.policy.settings.capacity_timeout_s
        state.capacity_reasons[group] = reason
        log.warning(
            "group %s out of capacity (%s): skipped for %ss", group, reason, self.policy.settings.capacity_timeout_s
        )

    def _save(self, state: State) -> None:
        if not self.dry_run:
            self.state_file.save(state)

    def run_once(self) -> LoopResult:
        self.aws_unread = None
        state = self.state_file.load()
        now = self.clock()
        errors: list[str] = []
        jobs = signatures(self.demand.idle_jobs())
        asgs = self.observe_groups()
        nodes = self.nodes(asgs)
        self._capacity_failures(asgs, state, now, errors)
        done: list[str] = []
        decision = decide(self.policy, asgs, nodes, jobs, state, now, self.matcher)
        for _attempt in range(len(self.policy.groups) + 1):
            replan = self._execute(decision, state, now, done, errors, asgs)
            if not replan:
                break
            # A group ran out of capacity: its demand overflows to the next group, this loop.
            asgs = self.observe_groups()
            decision = decide(self.policy, asgs, self.nodes(asgs), jobs, state, now, self.matcher)
        for name in decision.forget:
            state.removing.pop(name, None)
        state.idle_since = decision.idle_since
        self._save(state)
        report = render(decision, done, errors, self._header(now))
        self.emit(report)
        return LoopResult(decision, done, errors, report)

    def _header(self, now: float) -> str:
        stamp = dt.datetime.fromtimestamp(now, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        notes = ["dry run: nothing done"] if self.dry_run else []
        if self.aws_unread is not None:
            notes.append(UNREAD_NOTE)
        return f"autoscale loop {stamp}" + (f" ({'; '.join(notes)})" if notes else "")

    def _safe_to_terminate(self, action: Terminate, asgs: dict[str, AsgState]) -> str | None:
        """None when the instance about to be terminated is, right now, the drained node's and no other
        node's; otherwise why not. The pool is read again: the decision's view is a moment old."""
        on_instance = [node for node in self.nodes(asgs) if node.instance_id == action.instance_id]
        if not on_instance:
            return f"no pool node is on {action.instance_id} now"
        if len(on_instance) > 1 or on_instance[0].name != action.node:
            names = ", ".join(node.name for node in on_instance)
            return f"{action.instance_id} is now the instance of {names}"
        node = on_instance[0]
        if node.state is not NodeState.DRAINED:
            return f"it is {node.state.value} now"
        return None

    def _execute(
        self,
        decision: Decision,
        state: State,
        now: float,
        done: list[str],
        errors: list[str],
        asgs: dict[str, AsgState],
    ) -> bool:
        """Carry out the actions (cancel drains, capacity, terminations, drains); True to re-plan."""
        order = {CancelDrain: 0, SetDesired: 1, Terminate: 2, Drain: 3}
        actions = sorted(decision.actions, key=lambda a: order[type(a)])
        for action in actions:
            if self.dry_run:
                unknown = " (its current capacity unknown: AWS not read)" if self.aws_unread is not None else ""
                done.append(f"[dry-run] would {action.describe()}{unknown}")
                continue
            try:
                if isinstance(action, CancelDrain):
                    self.pool.cancel_drain(action.node)
                    state.removing.pop(action.node, None)
                elif isinstance(action, SetDesired):
                    try:
                        self.cloud.set_desired(action.region, action.asg, action.target)
                    except CapacityError as error:
                        self._time_out(state, action.group, now, str(error))
                        errors.append(str(error))
                        done.append(f"capacity error on {action.asg}: overflowing its demand")
                        self._save(state)
                        return True
                elif isinstance(action, Terminate):
                    why_not = self._safe_to_terminate(action, asgs)
                    if why_not is not None:
                        done.append(f"skipped terminating {action.instance_id} ({action.node}): {why_not}")
                        continue
                    self.cloud.terminate(action.region, action.instance_id)
                    state.removing.pop(action.node, None)
                    self._save(state)
                elif isinstance(action, Drain):
                    removal = state.removing.get(action.node) or Removal(action.instance_id, action.group, now)
                    state.removing[action.node] = removal
                    self._save(state)  # before the request: a restart must find this node
                    try:
                        self.pool.drain(action.node, DRAIN_REASON)
                    except PoolError as error:
                        if "already draining" not in str(error):
                            raise
                    removal.drain_sent = True
                    self._save(state)
                done.append(action.describe())
            except (CloudError, PoolError) as error:
                errors.append(f"{action.describe()}: {error}")
        return False

    def run_forever(self, interval_s: float | None = None) -> None:
        interval = interval_s if interval_s is not None else self.policy.settings.loop_interval_s
        failures = 0
        while True:
            try:
                result = self.run_once()
                failures = failures + 1 if result.errors else 0
            except (CloudError, PoolError, OSError, ValueError) as error:
                failures += 1
                log.error("autoscale loop failed: %s", error)
            except Exception as error:  # htcondor2 query failures surface as various exception types
                failures += 1
                log.exception("autoscale loop failed: %s", error)
            delay = min(interval * (2**failures), self.policy.settings.backoff_max_s) if failures else interval
            if failures:
                log.warning("backing off %.0fs after %d failed loop(s)", delay, failures)
            time.sleep(delay)
