"""Dynamic group configs (Kafka's GROUP config resource, KIP-848/KIP-932): per-group values
that override the broker's, set incrementally and kept durable in the group log as one
GroupConfig record per group (a tombstone once a group has none left).

Every value is checked against the broker-level bounds (Kafka's group.consumer.min/max...,
group.share.min/max...) before any record is built; an invalid request changes nothing
and fails with INVALID_CONFIG. Groups need not exist to be configured, as in Kafka.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from ..coordinator import Result
from ..errors import Errors, KafkaError, raise_if
from . import records as R

__all__ = ["GroupConfigEntry", "GroupConfigManager", "GROUP_CONFIG_NAMES", "parse_iso_duration_ms",
           "parse_share_auto_offset_reset"]


@dataclass(frozen=True)
class _Spec:
    broker_name: str  # the broker config giving the default
    default: int | str
    bounds: tuple[str, str, int, int] | None = None  # broker min name, max name, their defaults


_SPECS: dict[str, _Spec] = {
    "consumer.session.timeout.ms": _Spec("group.consumer.session.timeout.ms", 45000,
                                         ("group.consumer.min.session.timeout.ms",
                                          "group.consumer.max.session.timeout.ms", 45000, 60000)),
    "consumer.heartbeat.interval.ms": _Spec("group.consumer.heartbeat.interval.ms", 5000,
                                            ("group.consumer.min.heartbeat.interval.ms",
                                             "group.consumer.max.heartbeat.interval.ms", 5000, 15000)),
    "share.session.timeout.ms": _Spec("group.share.session.timeout.ms", 45000,
                                      ("group.share.min.session.timeout.ms",
                                       "group.share.max.session.timeout.ms", 45000, 60000)),
    "share.heartbeat.interval.ms": _Spec("group.share.heartbeat.interval.ms", 5000,
                                         ("group.share.min.heartbeat.interval.ms",
                                          "group.share.max.heartbeat.interval.ms", 5000, 15000)),
    "share.record.lock.duration.ms": _Spec("group.share.record.lock.duration.ms", 30000,
                                           ("group.share.min.record.lock.duration.ms",
                                            "group.share.max.record.lock.duration.ms", 15000, 60000)),
    "share.auto.offset.reset": _Spec("share.auto.offset.reset", "latest"),
    "share.isolation.level": _Spec("share.isolation.level", "read_uncommitted"),
}
GROUP_CONFIG_NAMES = tuple(sorted(_SPECS))

# each heartbeat interval must stay below the session timeout it goes with
_PAIRS = (("consumer.heartbeat.interval.ms", "consumer.session.timeout.ms"),
          ("share.heartbeat.interval.ms", "share.session.timeout.ms"))

# java.time.Duration.parse's grammar: PnDTnHnMn.nS, case-insensitive, signed parts
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?"
                       r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
                       re.IGNORECASE)


def parse_iso_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's Duration.parse reads it, in milliseconds (fractions of
    a millisecond are dropped); ValueError if it is not one."""
    m = _DURATION.fullmatch(text)
    if m is None or m.group(3) == "T" or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise ValueError(f"{text!r} is not an ISO-8601 duration")
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    fraction = (m.group(7) or "").ljust(9, "0")
    nanos = int(fraction) * (-1 if m.group(6) and m.group(6).startswith("-") else 1)
    total = ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000 + nanos // 1_000_000
    return -total if m.group(1) == "-" else total


def parse_share_auto_offset_reset(value: str) -> tuple[str, int]:
    """("latest", 0), ("earliest", 0) or ("by_duration", milliseconds back from now)."""
    if value in ("latest", "earliest"):
        return value, 0
    prefix = "by_duration:"
    if value.startswith(prefix):
        ms = parse_iso_duration_ms(value[len(prefix):])
        if ms >= 0:
            return "by_duration", ms
    raise ValueError(f"share.auto.offset.reset must be latest, earliest or by_duration:<ISO-8601 duration "
                     f"not negative>, not {value!r}")


@dataclass(frozen=True)
class GroupConfigEntry:
    """One row of describe_group_config (Kafka's DescribeConfigsResourceResult, reduced)."""
    name: str
    value: int | str
    is_default: bool


class GroupConfigManager:
    def __init__(self, broker_config: Mapping) -> None:
        self.broker_config = broker_config
        self.configs: dict[str, dict] = {}  # group id -> its overrides (hard state)

    def replayers(self) -> dict:
        return {R.GroupConfigKey: self._replay}

    def _replay(self, offset: int, key, value) -> None:
        if value is None:
            self.configs.pop(key.group_id, None)
        else:
            self.configs[key.group_id] = dict(value.configs)

    # ------------------------------------------------------------------ reads

    def default(self, name: str) -> int | str:
        spec = _SPECS[name]
        value = self.broker_config.get(spec.broker_name)
        return spec.default if value is None else type(spec.default)(value)

    def value(self, group_id: str, name: str) -> int | str:
        """The group's value of a group config, or the broker's."""
        overrides = self.configs.get(group_id)
        if overrides is not None and name in overrides:
            return overrides[name]
        return self.default(name)

    def group_ids(self) -> list[str]:
        """The groups with a config of their own (Kafka's GroupConfigManager.groupIds)."""
        return sorted(self.configs)

    def describe_group_config(self, group_id: str) -> list[GroupConfigEntry]:
        raise_if(not group_id, Errors.INVALID_GROUP_ID, "empty group id")
        overrides = self.configs.get(group_id, {})
        return [GroupConfigEntry(name, overrides[name], False) if name in overrides
                else GroupConfigEntry(name, self.default(name), True) for name in GROUP_CONFIG_NAMES]

    # ------------------------------------------------------------------ writes

    def alter_group_config(self, group_id: str, configs: Mapping[str, object], now_ms: int) -> Result:
        """Incremental: a value sets a config, None removes the group's value. Response
        None; INVALID_CONFIG (and no change) if any name or value is invalid."""
        raise_if(not group_id, Errors.INVALID_GROUP_ID, "empty group id")
        current = self.configs.get(group_id, {})
        updated = dict(current)
        for name, raw in configs.items():
            raise_if(name not in _SPECS, Errors.INVALID_CONFIG, f"Unknown group config name: {name}")
            if raw is None:
                updated.pop(name, None)
            else:
                updated[name] = self._validated(name, raw)
        for interval, session in _PAIRS:
            if interval in updated or session in updated:
                raise_if(self._value_in(updated, interval) >= self._value_in(updated, session), Errors.INVALID_CONFIG,
                         f"{interval} must be less than {session}")
        if updated == current:
            return Result()
        if not updated:
            return Result([R.group_config_tombstone(group_id)])
        return Result([R.group_config_record(group_id, updated)])

    def _value_in(self, overrides: Mapping, name: str) -> int | str:
        return overrides[name] if name in overrides else self.default(name)

    def tombstones(self, group_id: str) -> list:
        """The record that drops a deleted group's configs, if it has any."""
        return [R.group_config_tombstone(group_id)] if group_id in self.configs else []

    def _validated(self, name: str, raw) -> int | str:
        spec = _SPECS[name]
        if spec.bounds is not None:
            try:
                if isinstance(raw, bool) or isinstance(raw, float):
                    raise ValueError
                value = int(raw)
            except (TypeError, ValueError):
                raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {raw!r} for configuration {name}: "
                                                       f"it must be an integer") from None
            min_name, max_name, min_default, max_default = spec.bounds
            low = int(self.broker_config.get(min_name, min_default))
            high = int(self.broker_config.get(max_name, max_default))
            raise_if(value < low, Errors.INVALID_CONFIG, f"{name} must be greater than or equal to {min_name} ({low})")
            raise_if(value > high, Errors.INVALID_CONFIG, f"{name} must be less than or equal to {max_name} ({high})")
            return value
        raise_if(not isinstance(raw, str), Errors.INVALID_CONFIG, f"Invalid value {raw!r} for configuration {name}")
        if name == "share.isolation.level":
            raise_if(raw not in ("read_committed", "read_uncommitted"), Errors.INVALID_CONFIG,
                     f"Invalid value {raw} for configuration {name}: String must be one of: "
                     f"read_committed, read_uncommitted")
        else:
            try:
                parse_share_auto_offset_reset(raw)
            except ValueError as e:
                raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: {e}") from None
        return raw
