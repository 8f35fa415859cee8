# -*- test-case-name: tests.api.test_tables -*-
"""
Printers of the workload groups: C{apps}, C{batch}, C{autoscaling} and
C{policy}, after upstream's C{printers.go}.
"""

from orchd.api import autoscalingv1
from orchd.api.errors import StatusError
from orchd.api.printers.base import (
    BOOLEAN, INTEGER, STRING, Column, ConvertedPrinter, Printer, age_column, as_dict, as_list, bool_text,
    container_columns, format_label_selector, format_labels, human_duration, int_or_string,
    name_column, parse_time, selector_string,
)

_SELECTOR = "Label query over the pods the controller manages."


def _selector_column(*path):
    return Column("Selector", STRING, _SELECTOR,
                  lambda row: format_label_selector(row.get(*path)), priority=1)


def _ready_of_desired(row):
    ready = row.get("status", "readyReplicas", default=0)
    return f"{ready}/{row.get('spec', 'replicas', default=1)}"


def _deployment_selector(row):
    try:
        return selector_string(row.get("spec", "selector"))
    except StatusError:
        return "<invalid>"


DEPLOYMENT = Printer(
    name_column(),
    Column("Ready", STRING, "Number of the pod with ready state", _ready_of_desired),
    Column("Up-to-date", STRING, "Pods running the newest template.",
           lambda row: row.get("status", "updatedReplicas", default=0)),
    Column("Available", STRING, "Pods available to their users.",
           lambda row: row.get("status", "availableReplicas", default=0)),
    age_column(),
    *container_columns("spec", "template", "spec"),
    Column("Selector", STRING, _SELECTOR, _deployment_selector, priority=1),
)

#: The Scale of a scale subresource (upstream's C{printScale}).
SCALE = Printer(
    name_column(),
    Column("Desired", INTEGER, "Desired number of instances.",
           lambda row: row.get("spec", "replicas", default=0)),
    Column("Available", INTEGER, "Available number of instances.",
           lambda row: row.get("status", "replicas", default=0)),
)

REPLICA_SET = Printer(
    name_column(),
    Column("Desired", INTEGER, "Number of desired pods.",
           lambda row: row.get("spec", "replicas", default=1)),
    Column("Current", INTEGER, "Number of pods observed.",
           lambda row: row.get("status", "replicas", default=0)),
    Column("Ready", INTEGER, "Number of ready pods.",
           lambda row: row.get("status", "readyReplicas", default=0)),
    age_column(),
    *container_columns("spec", "template", "spec"),
    _selector_column("spec", "selector"),
)


def _status(key):
    return lambda row: row.get("status", key, default=0)


DAEMON_SET = Printer(
    name_column(),
    Column("Desired", INTEGER, "Nodes that should run the daemon pod.",
           _status("desiredNumberScheduled")),
    Column("Current", INTEGER, "Nodes running at least one daemon pod.",
           _status("currentNumberScheduled")),
    Column("Ready", INTEGER, "Nodes whose daemon pod is ready.", _status("numberReady")),
    Column("Up-to-date", INTEGER, "Nodes running the newest daemon pod.",
           _status("updatedNumberScheduled")),
    Column("Available", INTEGER, "Nodes whose daemon pod is available.",
           _status("numberAvailable")),
    Column("Node Selector", STRING, "Labels a node must have to run the daemon pod.",
           lambda row: format_labels(row.get("spec", "template", "spec", "nodeSelector"))),
    age_column(),
    *container_columns("spec", "template", "spec"),
    _selector_column("spec", "selector"),
)

STATEFUL_SET = Printer(
    name_column(),
    Column("Ready", STRING, "Number of the pod with ready state", _ready_of_desired),
    age_column(),
    *container_columns("spec", "template", "spec"),
)


def _controller(row):
    """The controlling owner as C{kind.group/name}, as upstream's C{formatResourceName}."""
    for ref in as_list(row.meta.get("ownerReferences")):
        ref = as_dict(ref)
        if ref.get("controller") is True:
            api_version = str(ref.get("apiVersion", ""))
            group = api_version.split("/", 1)[0] if "/" in api_version else ""
            kind = str(ref.get("kind", ""))
            if not kind and not group:
                return ref.get("name", "")
            qualified = f"{kind}.{group}" if group else kind
            return f"{qualified.lower()}/{ref.get('name', '')}"
    return "<none>"


CONTROLLER_REVISION = Printer(
    name_column(),
    Column("Controller", STRING, "Controller of the object", _controller),
    Column("Revision", STRING, "The revision of the state this object holds.",
           lambda row: row.get("revision", default=0)),
    age_column(),
)

# -- batch -----------------------------------------------------------------------


def _job_condition(row, type_):
    for cond in as_list(row.get("status", "conditions")):
        if as_dict(cond).get("type") == type_:
            return cond.get("status") == "True"
    return False


def _job_status(row):
    if _job_condition(row, "Complete"):
        return "Complete"
    if _job_condition(row, "Failed"):
        return "Failed"
    if row.meta.get("deletionTimestamp"):
        return "Terminating"
    if _job_condition(row, "Suspended"):
        return "Suspended"
    if _job_condition(row, "FailureTarget"):
        return "FailureTarget"
    return "Running"


def _completions(row):
    succeeded = row.get("status", "succeeded", default=0)
    completions = row.get("spec", "completions")
    if completions is not None:
        return f"{succeeded}/{completions}"
    parallelism = row.get("spec", "parallelism", default=0)
    if parallelism > 1:
        return f"{succeeded}/1 of {parallelism}"
    return f"{succeeded}/1"


def _job_duration(row):
    start = parse_time(row.get("status", "startTime"))
    if start is None:
        return ""
    end = parse_time(row.get("status", "completionTime"))
    return human_duration((row.now if end is None else end) - start)


JOB = Printer(
    name_column(),
    Column("Status", STRING, "Status of the job.", _job_status),
    Column("Completions", STRING, "The number of pods which reached phase Succeeded.",
           _completions),
    Column("Duration", STRING, "Time required to complete the job.", _job_duration),
    age_column(),
    *container_columns("spec", "template", "spec"),
    _selector_column("spec", "selector"),
)


def _last_schedule(row):
    if row.get("status", "lastScheduleTime") is None:
        return "<none>"
    return row.since(row.get("status", "lastScheduleTime"))


CRON_JOB = Printer(
    name_column(),
    Column("Schedule", STRING, "The schedule in Cron format.",
           lambda row: row.get("spec", "schedule", default="")),
    Column("Timezone", STRING, "The time zone the schedule is read in.",
           lambda row: row.get("spec", "timeZone", default="<none>")),
    Column("Suspend", BOOLEAN, "Whether new runs are suspended.",
           lambda row: bool_text(row.get("spec", "suspend", default=False))),
    Column("Active", INTEGER, "The number of running jobs.",
           lambda row: len(as_list(row.get("status", "active")))),
    Column("Last Schedule", STRING, "When a job was last scheduled.", _last_schedule),
    age_column(),
    *container_columns("spec", "jobTemplate", "spec", "template", "spec"),
    _selector_column("spec", "jobTemplate", "spec", "selector"),
)

# -- autoscaling -----------------------------------------------------------------


def _metric(spec, status):
    """One target of an HPA as C{current/target}, per upstream's C{formatHPAMetrics}."""
    kind = spec.get("type")
    source_key = {"External": "external", "Pods": "pods", "Object": "object",
                  "Resource": "resource", "ContainerResource": "containerResource"}.get(kind)
    if source_key is None:
        return "<unknown type>"
    source = as_dict(spec.get(source_key))
    target = as_dict(source.get("target"))
    current = as_dict(as_dict(status.get(source_key)).get("current")) if status else {}
    has_status = bool(status) and isinstance(status.get(source_key), dict)
    if kind == "Pods":
        now = current.get("averageValue", "<unknown>") if has_status else "<unknown>"
        return f"{now}/{target.get('averageValue', '')}"
    if kind in ("External", "Object"):
        if target.get("averageValue") is not None:
            now = current.get("averageValue") if has_status else None
            return f"{now or '<unknown>'}/{target['averageValue']} (avg)"
        now = current.get("value", "<unknown>") if has_status else "<unknown>"
        return f"{now}/{target.get('value', '')}"
    resource = source.get("name", "")
    if target.get("averageValue") is not None:
        now = current.get("averageValue", "<unknown>") if has_status else "<unknown>"
        return f"{resource}: {now}/{target['averageValue']}"
    utilization = current.get("averageUtilization") if has_status else None
    now = "<unknown>" if utilization is None else f"{utilization}%"
    wanted = target.get("averageUtilization")
    return f"{resource}: {now}/{'<auto>' if wanted is None else f'{wanted}%'}"


def _hpa_targets(row):
    specs = as_list(row.get("spec", "metrics"))
    if not specs:
        return "<none>"
    statuses = as_list(row.get("status", "currentMetrics"))
    shown = [_metric(as_dict(spec), as_dict(statuses[i]) if i < len(statuses) else None)
             for i, spec in enumerate(specs)]
    text = ", ".join(shown[:2])
    return f"{text} + {len(shown) - 2} more..." if len(shown) > 2 else text


def _hpa_reference(row):
    ref = as_dict(row.get("spec", "scaleTargetRef"))
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


def _min_pods(row):
    value = row.get("spec", "minReplicas")
    return "<unset>" if value is None else str(value)


HORIZONTAL_POD_AUTOSCALER = Printer(
    name_column(),
    Column("Reference", STRING, "The resource being scaled.", _hpa_reference),
    Column("Targets", STRING, "Current and target values of the metrics.", _hpa_targets),
    Column("MinPods", STRING, "The lower limit of replicas.", _min_pods),
    Column("MaxPods", STRING, "The upper limit of replicas.",
           lambda row: row.get("spec", "maxReplicas", default=0)),
    Column("Replicas", STRING, "The current number of replicas.",
           lambda row: row.get("status", "currentReplicas", default=0)),
    age_column(),
)

#: autoscaling/v1's table: upstream prints the internal (v2) object, so
#: both versions show the same columns and cells.
HORIZONTAL_POD_AUTOSCALER_V1 = ConvertedPrinter(HORIZONTAL_POD_AUTOSCALER, autoscalingv1.to_v2)

# -- policy ----------------------------------------------------------------------


def _budget(key):
    def cell(row):
        value = row.get("spec", key)
        return "N/A" if value is None else int_or_string(value)
    return cell


POD_DISRUPTION_BUDGET = Printer(
    name_column(),
    Column("Min Available", STRING, "The minimum number of pods that must be available.",
           _budget("minAvailable")),
    Column("Max Unavailable", STRING, "The maximum number of pods that may be unavailable.",
           _budget("maxUnavailable")),
    Column("Allowed Disruptions", INTEGER,
           "Calculated number of pods that may be disrupted at this time.",
           lambda row: row.get("status", "disruptionsAllowed", default=0)),
    age_column(),
)
