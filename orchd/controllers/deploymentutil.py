# -*- test-case-name: tests.controllers.test_deploymentutil -*-
"""
The Deployment controller's rules that need no API: upstream's
C{deployment/util/deployment_util.go} and C{controller.ComputeHash}, as
plain functions of JSON-shaped objects.

Names kubectl reads keep their upstream spelling [COMPAT]: the
C{deployment.kubernetes.io/*} annotations and the C{pod-template-hash}
label (see the specification's naming rule and WORKLOADS.md section 8).
"""

import copy
import struct
from functools import cmp_to_key

import orjson

from orchd.api.meta import rfc3339
from orchd.controllers.podstate import parse_time

REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
ROLLBACK_TO = "deprecated.deployment.rollback.to"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
HASH_LABEL = "pod-template-hash"
#: Annotations of a Deployment never copied to its ReplicaSets.
ANNOTATIONS_TO_SKIP = frozenset((LAST_APPLIED, REVISION, REVISION_HISTORY, DESIRED_REPLICAS,
                                 MAX_REPLICAS, ROLLBACK_TO))
#: Upstream's C{maxRevHistoryLengthInChars}.
MAX_REVISION_HISTORY_CHARS = 2000
INT32_MAX = 2 ** 31 - 1

ROLLING_UPDATE, RECREATE = "RollingUpdate", "Recreate"
PROGRESSING, AVAILABLE, REPLICA_FAILURE = "Progressing", "Available", "ReplicaFailure"
# Condition reasons.
REPLICA_SET_UPDATED = "ReplicaSetUpdated"
FAILED_RS_CREATE = "ReplicaSetCreateError"
NEW_RS_CREATED = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
MINIMUM_AVAILABLE = "MinimumReplicasAvailable"
MINIMUM_UNAVAILABLE = "MinimumReplicasUnavailable"

_FNV32_OFFSET, _FNV32_PRIME = 0x811C9DC5, 0x01000193
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _int(value, default):
    return value if isinstance(value, int) and not isinstance(value, bool) else default


# -- defaults ----------------------------------------------------------------------

def with_defaults(deployment):
    """
    A copy of the Deployment whose spec has upstream's defaults where it has
    none (C{apps/v1} C{SetDefaults_Deployment}), so the rules below read one
    shape whether or not the API server filled them in.
    """
    d = copy.deepcopy(deployment)
    spec = d.setdefault("spec", {})
    spec["replicas"] = _int(spec.get("replicas"), 1)
    strategy = spec.get("strategy")
    if not isinstance(strategy, dict):
        strategy = spec["strategy"] = {}
    strategy.setdefault("type", ROLLING_UPDATE)
    if strategy["type"] == ROLLING_UPDATE:
        rolling = strategy.get("rollingUpdate")
        if not isinstance(rolling, dict):
            rolling = strategy["rollingUpdate"] = {}
        rolling.setdefault("maxSurge", "25%")
        rolling.setdefault("maxUnavailable", "25%")
    spec["revisionHistoryLimit"] = _int(spec.get("revisionHistoryLimit"), 10)
    spec["progressDeadlineSeconds"] = _int(spec.get("progressDeadlineSeconds"), 600)
    spec["minReadySeconds"] = _int(spec.get("minReadySeconds"), 0)
    d.setdefault("status", {})
    d["metadata"].setdefault("annotations", {})
    return d


def replicas(obj):
    """C{spec.replicas} of a Deployment or ReplicaSet (0 for a ReplicaSet without it)."""
    return _int((obj.get("spec") or {}).get("replicas"), 0)


def status_count(obj, field):
    return _int((obj.get("status") or {}).get(field), 0)


# -- the pod template hash ---------------------------------------------------------

def safe_encode(text):
    """Upstream's C{rand.SafeEncodeString}: each character mapped into a vowel-free alphabet."""
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in text)


def fnv32a(data):
    value = _FNV32_OFFSET
    for byte in data:
        value = ((value ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return value


def compute_hash(template, collision_count=None):
    """
    The pod-template hash of a template (upstream's C{controller.ComputeHash}):
    FNV-32a of the template, then of the collision count as 8 little-endian
    bytes when there is one, written in decimal and C{safe_encode}d. Upstream
    hashes Go's dump of its struct; this hashes canonical JSON: nobody
    recomputes the value, it only has to be stable.
    """
    data = orjson.dumps(template or {}, option=orjson.OPT_SORT_KEYS)
    if collision_count is not None:
        data += struct.pack("<I", collision_count & 0xFFFFFFFF) + b"\0" * 4
    return safe_encode(str(fnv32a(data)))


def _semantic(value):
    """A value with empty maps and lists and nulls dropped: Go's semantic equality."""
    if isinstance(value, dict):
        out = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != {} and v != []}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def template_without_hash(template):
    """A copy of a pod template without the C{pod-template-hash} label."""
    template = copy.deepcopy(template or {})
    labels = (template.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(HASH_LABEL, None)
    return template


def equal_ignore_hash(t1, t2):
    """Upstream's C{EqualIgnoreHash}: equal templates but for C{pod-template-hash}."""
    return _semantic(template_without_hash(t1)) == _semantic(template_without_hash(t2))


# -- surge and unavailability ------------------------------------------------------

def scaled_value(value, total, round_up):
    """
    An int-or-percent (C{3}, C{"25%"}) of C{total} (upstream's
    C{GetScaledValueFromIntOrPercent}).

    @raise ValueError: for a string that is not a percentage.
    """
    if isinstance(value, bool):
        raise ValueError(f"invalid value for IntOrString: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].lstrip("-").isdigit():
        percent = int(value[:-1])
        return -(-percent * total // 100) if round_up else percent * total // 100
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")


def resolve_fenceposts(max_surge, max_unavailable, desired):
    """
    C{(surge, unavailable)}: surge rounded up, unavailability down, and
    unavailability 1 when both come to 0 (upstream's C{ResolveFenceposts}).
    """
    surge = scaled_value(0 if max_surge is None else max_surge, desired, True)
    unavailable = scaled_value(0 if max_unavailable is None else max_unavailable, desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def is_rolling_update(d):
    return d["spec"]["strategy"].get("type") == ROLLING_UPDATE


def _rolling(d):
    return d["spec"]["strategy"].get("rollingUpdate") or {}


def max_unavailable(d):
    """Upstream's C{MaxUnavailable}: 0 for Recreate or no replicas, at most the replicas."""
    wanted = replicas(d)
    if not is_rolling_update(d) or wanted == 0:
        return 0
    rolling = _rolling(d)
    _, unavailable = resolve_fenceposts(rolling.get("maxSurge"), rolling.get("maxUnavailable"),
                                        wanted)
    return min(unavailable, wanted)


def max_surge(d):
    """Upstream's C{MaxSurge}: 0 for Recreate."""
    if not is_rolling_update(d):
        return 0
    rolling = _rolling(d)
    surge, _ = resolve_fenceposts(rolling.get("maxSurge"), rolling.get("maxUnavailable"),
                                  replicas(d))
    return surge


def has_progress_deadline(d):
    deadline = d["spec"].get("progressDeadlineSeconds")
    return isinstance(deadline, int) and deadline != INT32_MAX


def has_revision_history_limit(d):
    limit = d["spec"].get("revisionHistoryLimit")
    return isinstance(limit, int) and limit != INT32_MAX


# -- replica sets ------------------------------------------------------------------

def revision(rs):
    """
    The C{deployment.kubernetes.io/revision} of an object; 0 without one.

    @raise ValueError: for a value that is no integer.
    """
    value = ((rs.get("metadata") or {}).get("annotations") or {}).get(REVISION)
    if value is None:
        return 0
    return int(value)


def max_revision(rss):
    """The highest revision among C{rss}, unparseable ones skipped."""
    best = 0
    for rs in rss:
        try:
            best = max(best, revision(rs))
        except ValueError:
            continue
    return best


def _created(rs):
    return parse_time(rs["metadata"].get("creationTimestamp")) or 0


def _by_creation(a, b):
    """Upstream's C{ReplicaSetsByCreationTimestamp}: older first, then by name."""
    ca, cb = _created(a), _created(b)
    if ca == cb:
        na, nb = a["metadata"]["name"], b["metadata"]["name"]
        return (na > nb) - (na < nb)
    return -1 if ca < cb else 1


def by_creation(rss):
    return sorted(rss, key=cmp_to_key(_by_creation))


def by_size_older(rss):
    """Largest first; among equals, older first (for scaling down)."""
    return sorted(rss, key=cmp_to_key(
        lambda a, b: (replicas(b) - replicas(a)) or _by_creation(a, b)))


def by_size_newer(rss):
    """Largest first; among equals, newer first (for scaling up)."""
    return sorted(rss, key=cmp_to_key(
        lambda a, b: (replicas(b) - replicas(a)) or _by_creation(b, a)))


def by_revision(rss):
    """Lowest revision first; creation time when revisions tie or do not parse."""
    def compare(a, b):
        try:
            ra, rb = revision(a), revision(b)
        except ValueError:
            return _by_creation(a, b)
        if ra == rb:
            return _by_creation(a, b)
        return -1 if ra < rb else 1
    return sorted(rss, key=cmp_to_key(compare))


def active(rss):
    """The replica sets with replicas wanted (upstream's C{FilterActiveReplicaSets})."""
    return [rs for rs in rss if rs is not None and replicas(rs) > 0]


def find_new_replica_set(d, rss):
    """The oldest replica set whose template is the Deployment's, or None."""
    for rs in by_creation(rss):
        if equal_ignore_hash((rs.get("spec") or {}).get("template"), d["spec"].get("template")):
            return rs
    return None


def find_old_replica_sets(d, rss):
    """Every replica set but the new one, oldest first."""
    new = find_new_replica_set(d, rss)
    new_uid = new["metadata"]["uid"] if new is not None else None
    return [rs for rs in rss if rs["metadata"]["uid"] != new_uid]


def find_active_or_latest(new, olds):
    """
    The only active replica set, or the newest when none is active; None
    when several are active (upstream's C{FindActiveOrLatest}).
    """
    if new is None and not olds:
        return None
    olds = list(reversed(by_creation(olds)))
    actives = active(olds + [new])
    if not actives:
        return new if new is not None else olds[0]
    return actives[0] if len(actives) == 1 else None


def sum_replicas(rss):
    return sum(replicas(rs) for rs in rss if rs is not None)


def sum_status(rss, field):
    return sum(status_count(rs, field) for rs in rss if rs is not None)


def _int_annotation(rs, key):
    value = ((rs.get("metadata") or {}).get("annotations") or {}).get(key)
    try:
        return int(value), True
    except (TypeError, ValueError):
        return 0, False


def desired_replicas_annotation(rs):
    return _int_annotation(rs, DESIRED_REPLICAS)


def set_replicas_annotations(rs, desired, maximum):
    """Set C{desired-replicas} and C{max-replicas}; True if either changed."""
    annotations = rs["metadata"].setdefault("annotations", {})
    changed = False
    for key, value in ((DESIRED_REPLICAS, str(desired)), (MAX_REPLICAS, str(maximum))):
        if annotations.get(key) != value:
            annotations[key] = value
            changed = True
    return changed


def replicas_annotations_need_update(rs, desired, maximum):
    annotations = (rs.get("metadata") or {}).get("annotations") or {}
    return (annotations.get(DESIRED_REPLICAS) != str(desired)
            or annotations.get(MAX_REPLICAS) != str(maximum))


def set_new_replica_set_annotations(d, rs, new_revision, exists):
    """
    Copy the Deployment's annotations (but L{ANNOTATIONS_TO_SKIP}) to the
    new replica set and raise its revision to C{new_revision}, keeping the
    revision it had in C{revision-history}; a replica set about to be
    created also gets its replicas annotations. Returns True if anything
    changed (upstream's C{SetNewReplicaSetAnnotations}).
    """
    annotations = rs["metadata"].setdefault("annotations", {})
    changed = False
    for key, value in (d["metadata"].get("annotations") or {}).items():
        if key not in ANNOTATIONS_TO_SKIP and annotations.get(key) != value:
            annotations[key] = value
            changed = True
    old = annotations.get(REVISION)
    try:
        old_number = int(old) if old is not None else 0
    except ValueError:
        return False
    new_number = int(new_revision)
    if old_number < new_number:
        annotations[REVISION] = new_revision
        changed = True
        if old is not None:
            history = annotations.get(REVISION_HISTORY) or ""
            if not history:
                annotations[REVISION_HISTORY] = old
            else:
                parts = history.split(",")
                total = len(history) + len(old) + 1
                start = 0
                while total > MAX_REVISION_HISTORY_CHARS and start < len(parts):
                    total -= len(parts[start]) + 1
                    start += 1
                if total <= MAX_REVISION_HISTORY_CHARS:
                    annotations[REVISION_HISTORY] = ",".join(parts[start:] + [old])
    if not exists and set_replicas_annotations(rs, replicas(d), replicas(d) + max_surge(d)):
        changed = True
    return changed


def round_half_away(value):
    """Upstream's C{integer.RoundToInt32}."""
    return int(value - 0.5) if value < 0 else int(value + 0.5)


def replica_set_fraction(rs, d):
    """How many replicas C{rs} gains (or loses) in a proportional scaling."""
    if replicas(d) == 0:
        return -replicas(rs)
    deployment_replicas = replicas(d) + max_surge(d)
    annotated, ok = _int_annotation(rs, MAX_REPLICAS)
    if not ok:
        annotated = status_count(d, "replicas")
    if annotated == 0:
        return 0
    return round_half_away(replicas(rs) * deployment_replicas / annotated) - replicas(rs)


def proportion(rs, d, to_add, added):
    """Upstream's C{GetProportion}: C{rs}'s share of C{to_add}, within what is left."""
    if rs is None or replicas(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = replica_set_fraction(rs, d)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def is_saturated(d, rs):
    """The new replica set holds every replica, all available, and knows it."""
    if rs is None:
        return False
    desired, ok = desired_replicas_annotation(rs)
    return (ok and replicas(rs) == replicas(d) and desired == replicas(d)
            and status_count(rs, "availableReplicas") == replicas(d))


def new_rs_new_replicas(d, all_rss, new):
    """The size the new replica set may grow to now (upstream's C{NewRSNewReplicas})."""
    if is_rolling_update(d):
        surge = scaled_value(_rolling(d).get("maxSurge", 0), replicas(d), True)
        current = sum_replicas(all_rss)
        most = replicas(d) + surge
        if current >= most:
            return replicas(new)
        return replicas(new) + min(most - current, replicas(d) - replicas(new))
    return replicas(d)


# -- status and conditions ---------------------------------------------------------

def new_condition(type, status, reason, message, now):
    """A Deployment condition stamped C{now} (seconds)."""
    stamp = rfc3339(now)
    return {"type": type, "status": status, "lastUpdateTime": stamp,
            "lastTransitionTime": stamp, "reason": reason, "message": message}


def get_condition(status, type):
    for condition in (status or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == type:
            return condition
    return None


def set_condition(status, condition):
    """
    Upstream's C{SetDeploymentCondition}: no change when the status and
    reason are the same; the transition time kept when only the reason changes.
    """
    current = get_condition(status, condition["type"])
    if current is not None and current.get("status") == condition["status"] \
            and current.get("reason") == condition["reason"]:
        return
    if current is not None and current.get("status") == condition["status"]:
        condition["lastTransitionTime"] = current.get("lastTransitionTime")
    remove_condition(status, condition["type"])
    status.setdefault("conditions", []).append(condition)


def remove_condition(status, type):
    conditions = [c for c in status.get("conditions") or () if c.get("type") != type]
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)


def replica_set_to_deployment_condition(condition):
    return {"type": condition.get("type"), "status": condition.get("status"),
            "lastUpdateTime": condition.get("lastTransitionTime"),
            "lastTransitionTime": condition.get("lastTransitionTime"),
            "reason": condition.get("reason"), "message": condition.get("message")}


def calculate_status(all_rss, new, d, now):
    """
    The Deployment's status from its replica sets (upstream's
    C{calculateStatus}), zero counts left out as upstream's JSON does.
    """
    available = sum_status(all_rss, "availableReplicas")
    unavailable = max(0, sum_replicas(all_rss) - available)
    status = {}
    for field, value in (("observedGeneration", d["metadata"].get("generation") or 0),
                         ("replicas", sum_status(all_rss, "replicas")),
                         ("updatedReplicas", sum_status([new], "replicas")),
                         ("readyReplicas", sum_status(all_rss, "readyReplicas")),
                         ("availableReplicas", available),
                         ("unavailableReplicas", unavailable)):
        if value:
            status[field] = value
    collisions = d["status"].get("collisionCount")
    if collisions is not None:
        status["collisionCount"] = collisions
    conditions = [dict(c) for c in d["status"].get("conditions") or () if isinstance(c, dict)]
    if conditions:
        status["conditions"] = conditions
    if available >= replicas(d) - max_unavailable(d):
        set_condition(status, new_condition(AVAILABLE, "True", MINIMUM_AVAILABLE,
                                            "Deployment has minimum availability.", now))
    else:
        set_condition(status, new_condition(AVAILABLE, "False", MINIMUM_UNAVAILABLE,
                                            "Deployment does not have minimum availability.",
                                            now))
    return status


def deployment_complete(d, status):
    """Every replica updated and available, none old, the latest spec observed."""
    wanted = replicas(d)
    return (_int(status.get("updatedReplicas"), 0) == wanted
            and _int(status.get("replicas"), 0) == wanted
            and _int(status.get("availableReplicas"), 0) == wanted
            and _int(status.get("observedGeneration"), 0) >= (d["metadata"].get("generation") or 0))


def deployment_progressing(d, status):
    """Some sign of progress between the stored status and C{status}."""
    old = d["status"]

    def get(s, field):
        return _int(s.get(field), 0)

    old_olds = get(old, "replicas") - get(old, "updatedReplicas")
    new_olds = get(status, "replicas") - get(status, "updatedReplicas")
    return (get(status, "updatedReplicas") > get(old, "updatedReplicas")
            or new_olds < old_olds
            or get(status, "readyReplicas") > get(old, "readyReplicas")
            or get(status, "availableReplicas") > get(old, "availableReplicas"))


def deployment_timed_out(d, status, now):
    """
    No progress reported for longer than C{progressDeadlineSeconds}, or the
    timeout already recorded (upstream's C{DeploymentTimedOut}).
    """
    if not has_progress_deadline(d):
        return False
    condition = get_condition(status, PROGRESSING)
    if condition is None or condition.get("reason") == NEW_RS_AVAILABLE:
        return False
    if condition.get("reason") == TIMED_OUT:
        return True
    since = parse_time(condition.get("lastUpdateTime"))
    if since is None:
        return False
    return since + d["spec"]["progressDeadlineSeconds"] < now


def progress_check_delay(d, status, now):
    """
    Seconds until the Deployment must be looked at again for its progress
    deadline, or None (upstream's C{requeueStuckDeployment}).
    """
    condition = get_condition(d["status"], PROGRESSING)
    if not has_progress_deadline(d) or condition is None:
        return None
    if deployment_complete(d, status) or condition.get("reason") == TIMED_OUT:
        return None
    since = parse_time(condition.get("lastUpdateTime"))
    if since is None:
        return None
    after = since + d["spec"]["progressDeadlineSeconds"] - now
    return 0.0 if after < 1 else after + 1
