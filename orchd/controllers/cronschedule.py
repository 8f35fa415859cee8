# -*- test-case-name: tests.controllers.test_cronschedule -*-
"""
When a CronJob runs: the next time of a schedule in a time zone (robfig/cron's
C{SpecSchedule.Next} and C{ConstantDelaySchedule.Next}), and upstream's
C{mostRecentScheduleTime} (kk C{pkg/controller/cronjob/utils.go}): the
latest missed run, and how many were missed (over 100 is "too many").

Schedules are read by L{orchd.api.cron.parse_schedule}; times here are
seconds since the epoch, matched against the wall clock of the zone.
"""

import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from orchd.api.cron import parse_schedule

#: Upstream gives up looking for a next time five years ahead (robfig).
_YEARS_AHEAD = 5
#: Upstream's C{nextScheduleDelta}: the requeue lands just after the time.
NEXT_DELTA = 0.1
#: More missed runs than this is "too many" (upstream's 100).
MANY_MISSED = 100

_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0,
             "m": 60.0, "h": 3600.0}
_GO_TERM = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def zone(name):
    """
    The time zone of a CronJob's C{spec.timeZone} (UTC when None).

    @raise ValueError: for a zone that is not known.
    """
    if name is None or name == "" or name == "UTC":
        return timezone.utc
    if not isinstance(name, str) or name.startswith("/") or ".." in name:
        raise ValueError("unknown time zone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise ValueError(f"unknown time zone {name}") from e


def _go_seconds(text):
    text = text.lstrip("+")
    if text == "0":
        return 0.0
    total, position = 0.0, 0
    while position < len(text):
        match = _GO_TERM.match(text, position)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(f"invalid duration {text}")
        total += float(match.group(1)) * _GO_UNITS[match.group(2)]
        position = match.end()
    return total


class CronSchedule:
    """
    A parsed schedule in a zone, whose L{next} gives run times.

    @raise ValueError: (from the constructor) for a schedule or zone that
        cannot be read.
    """

    def __init__(self, text, zone_name=None):
        self._schedule = parse_schedule(text)
        self._zone = zone(zone_name)
        self._every = None
        if self._schedule.every is not None:
            # robfig rounds the delay down to whole seconds, at least one.
            self._every = max(int(_go_seconds(self._schedule.every)), 1)

    def next(self, after):
        """The first run time strictly after C{after} (seconds), or None within five years."""
        if self._every is not None:
            return float(int(after) + self._every)
        minutes, hours, days, months, weekdays = self._schedule.fields
        dom_star, dow_star = self._schedule.stars
        local = datetime.fromtimestamp(int(after), self._zone).replace(second=0, tzinfo=None)
        local += timedelta(minutes=1)
        limit = local.year + _YEARS_AHEAD
        while local.year <= limit:
            if local.month not in months:
                year, month = (local.year + 1, 1) if local.month == 12 else \
                    (local.year, local.month + 1)
                local = datetime(year, month, 1)
                continue
            dom_ok = local.day in days
            dow_ok = (local.weekday() + 1) % 7 in weekdays
            day_ok = (dom_ok and dow_ok) if (dom_star or dow_star) else (dom_ok or dow_ok)
            if not day_ok:
                local = datetime(local.year, local.month, local.day) + timedelta(days=1)
                continue
            if local.hour not in hours:
                local = local.replace(minute=0) + timedelta(hours=1)
                continue
            if local.minute not in minutes:
                local += timedelta(minutes=1)
                continue
            return local.replace(tzinfo=self._zone).timestamp()
        return None

    def format(self, when):
        """C{when} as RFC 3339 in the schedule's zone (the scheduled-timestamp annotation)."""
        moment = datetime.fromtimestamp(when, self._zone)
        text = moment.strftime("%Y-%m-%dT%H:%M:%S%z")
        if text.endswith("+0000") and self._zone is timezone.utc:
            return text[:-5] + "Z"
        return text[:-2] + ":" + text[-2:]


def most_recent(schedule, earliest, now):
    """
    Upstream's C{mostRecentScheduleTime}: C{(time, missed)}, the latest run
    time in C{(earliest, now]} (None if none) and roughly how many fell
    there.

    @raise ValueError: for a schedule whose runs are less than a second apart
        (a date that never comes, such as 31 February).
    """
    t1 = schedule.next(earliest)
    if t1 is None or now < t1:
        return None, 0
    t2 = schedule.next(t1)
    if t2 is None or now < t2:
        return t1, 1
    between = int(round(t2 - t1))
    if between < 1:
        raise ValueError("time difference between two schedules is less than 1 second")
    missed = int(now - t1) // between + 1
    recent = None
    # Jump close to now, as upstream; for a schedule whose runs are not evenly
    # apart (6-16/4 on weekdays) the jump may land past now: jump shorter.
    jump = missed - 2
    t = schedule.next(t1 + jump * between)
    while jump > 0 and (t is None or t > now):
        jump //= 2
        t = schedule.next(t1 + jump * between)
    if jump <= 0:
        t = t1
    while t is not None and t <= now:
        recent = t
        t = schedule.next(t)
    return recent, missed


def next_run_delay(schedule, earliest, now):
    """Seconds from C{now} until the run after the latest one due (upstream's C{nextScheduleTimeDuration})."""
    try:
        recent, _ = most_recent(schedule, earliest, now)
    except ValueError:
        return None
    following = schedule.next(recent if recent is not None else earliest)
    if following is None:
        return None
    return max(following + NEXT_DELTA - now, 0.0)
