"""EC2 Auto Scaling through boto3: read groups, raise desired capacity, terminate one drained instance.

Desired capacity is only ever raised here (or lowered to the instance count after a capacity
failure): lowering it otherwise would let the group pick which instance to terminate, busy or not.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

# Error codes (on the call, or in a failed scaling activity's message) that mean "no capacity here now".
CAPACITY_CODES = (
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "UnfulfillableCapacity",
    "MaxSpotInstanceCountExceeded",
    "SpotMaxPriceTooLow",
)


class CloudError(Exception):
    """An AWS call failed for a reason other than capacity (throttling, permissions, network...)."""


class CapacityError(CloudError):
    """The region/zone has no capacity for this instance type right now."""


class CredentialsError(CloudError):
    """boto3 found no AWS credentials (environment, ~/.aws, instance role): nothing was asked of AWS."""


@dataclass(frozen=True, slots=True)
class Instance:
    instance_id: str
    lifecycle_state: str  # Pending, InService, Terminating, ...
    private_ip: str | None = None  # from EC2 DescribeInstances: how a pool node is matched to it


@dataclass(frozen=True, slots=True)
class AsgState:
    name: str
    region: str
    desired: int
    min_size: int
    max_size: int
    instances: tuple[Instance, ...]

    @classmethod
    def unknown(cls, name: str, region: str, max_size: int) -> AsgState:
        """A group whose state could not be read, taken as empty (a dry run without credentials)."""
        return cls(name, region, desired=0, min_size=0, max_size=max_size, instances=())

    def live_instances(self) -> list[Instance]:
        return [i for i in self.instances if not i.lifecycle_state.startswith(("Terminat", "Detach"))]


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _wrap(error: Exception, what: str) -> CloudError:
    if isinstance(error, NoCredentialsError):
        return CredentialsError(f"{what}: no AWS credentials (none in the environment, ~/.aws or an instance role)")
    if isinstance(error, ClientError) and _code(error) in CAPACITY_CODES:
        return CapacityError(f"{what}: {_code(error)}: {error.response.get('Error', {}).get('Message', '')}")
    return CloudError(f"{what}: {error}")


class AutoScaling:
    """One boto3 Auto Scaling client per region; `endpoint_url` points them at a test server."""

    def __init__(self, endpoint_url: str | None = None, session: boto3.Session | None = None) -> None:
        self.endpoint_url = endpoint_url
        self.session = session or boto3.Session()
        self._clients: dict[str, Any] = {}
        self._config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=20)

    def client(self, region: str, service: str = "autoscaling") -> Any:
        if (service, region) not in self._clients:
            self._clients[(service, region)] = self.session.client(
                service, region_name=region, endpoint_url=self.endpoint_url, config=self._config
            )
        return self._clients[(service, region)]

    def private_ips(self, region: str, instance_ids: list[str]) -> dict[str, str]:
        """Instance id -> private IPv4 address, as EC2 reports them (instances without one are left out)."""
        if not instance_ids:
            return {}
        found: dict[str, str] = {}
        try:
            paginator = self.client(region, "ec2").get_paginator("describe_instances")
            for page in paginator.paginate(InstanceIds=instance_ids):
                for reservation in page["Reservations"]:
                    for instance in reservation["Instances"]:
                        if instance.get("PrivateIpAddress"):
                            found[instance["InstanceId"]] = instance["PrivateIpAddress"]
        except (ClientError, BotoCoreError) as error:
            raise _wrap(error, f"describing instances in {region}") from error
        return found

    def describe(self, region: str, names: Iterable[str]) -> dict[str, AsgState]:
        names = list(names)
        result: dict[str, AsgState] = {}
        try:
            paginator = self.client(region).get_paginator("describe_auto_scaling_groups")
            for page in paginator.paginate(AutoScalingGroupNames=names):
                for group in page["AutoScalingGroups"]:
                    result[group["AutoScalingGroupName"]] = AsgState(
                        name=group["AutoScalingGroupName"],
                        region=region,
                        desired=int(group["DesiredCapacity"]),
                        min_size=int(group["MinSize"]),
                        max_size=int(group["MaxSize"]),
                        instances=tuple(
                            Instance(i["InstanceId"], i["LifecycleState"])
                            for i in group.get("Instances", [])
                        ),
                    )
        except (ClientError, BotoCoreError) as error:
            raise _wrap(error, f"describing groups in {region}") from error
        ids = [instance.instance_id for asg in result.values() for instance in asg.instances]
        ips = self.private_ips(region, ids)
        return {
            name: dataclasses.replace(
                asg, instances=tuple(dataclasses.replace(i, private_ip=ips.get(i.instance_id)) for i in asg.instances)
            )
            for name, asg in result.items()
        }

    def set_desired(self, region: str, name: str, desired: int) -> None:
        try:
            self.client(region).set_desired_capacity(
                AutoScalingGroupName=name, DesiredCapacity=desired, HonorCooldown=False
            )
        except (ClientError, BotoCoreError) as error:
            raise _wrap(error, f"setting {name} desired capacity to {desired}") from error

    def terminate(self, region: str, instance_id: str) -> None:
        try:
            self.client(region).terminate_instance_in_auto_scaling_group(
                InstanceId=instance_id, ShouldDecrementDesiredCapacity=True
            )
        except (ClientError, BotoCoreError) as error:
            raise _wrap(error, f"terminating {instance_id}") from error

    def recent_capacity_failure(self, region: str, name: str, since: dt.datetime) -> str | None:
        """A failed launch since `since` whose message names a capacity error, or None."""
        try:
            response = self.client(region).describe_scaling_activities(AutoScalingGroupName=name, MaxRecords=10)
        except (ClientError, BotoCoreError) as error:
            raise _wrap(error, f"reading {name} scaling activities") from error
        for activity in response.get("Activities", []):
            started = activity.get("StartTime")
            if activity.get("StatusCode") != "Failed" or (isinstance(started, dt.datetime) and started < since):
                continue
            message = str(activity.get("StatusMessage", ""))
            for code in CAPACITY_CODES:
                if code in message:
                    return f"{code}: {message[:160]}"
        return None
