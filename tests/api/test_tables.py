"""Tests for L{orchd.api.tables} and L{orchd.api.printers}: server-side printing."""

import calendar
import operator
import time

import orjson
from twisted.trial.unittest import SynchronousTestCase

from orchd.api import tables
from orchd.api.errors import StatusError
from orchd.api.printers import cluster, core, events, networking, storage, workloads
from orchd.api.printers.base import Printer, human_duration, parse_time
from orchd.registry.kinds.builtin import KINDS

#: The clock every table here is made at: 2024-05-01T12:00:00Z.
NOW = calendar.timegm((2024, 5, 1, 12, 0, 0, 0, 0, 0))


def ago(seconds):
    """The RFC 3339 timestamp C{seconds} before L{NOW}."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - seconds))


def kind(group, name):
    """The served L{KindInfo} of C{group}/C{name}."""
    return next(k for k in KINDS if k.group == group and k.kind == name)


def meta(name, created=300, **extra):
    """Object metadata created C{created} seconds before L{NOW}."""
    data = {"name": name, "creationTimestamp": ago(created), "resourceVersion": "7"}
    data.update(extra)
    return data


def columns(info):
    """C{(name, type, priority)} of every column of C{info}'s tables."""
    return [(c["name"], c["type"], c["priority"]) for c in tables.column_definitions(info)]


def cells(info, obj, now=NOW):
    """The cells of the one row of C{obj}, keyed by column name."""
    table = tables.to_table(info, [obj], now)
    names = [c["name"] for c in table["columnDefinitions"]]
    return dict(zip(names, table["rows"][0]["cells"]))


POD = kind("", "Pod")
NODE = kind("", "Node")
SERVICE = kind("", "Service")
SECRET = kind("", "Secret")
CONFIG_MAP = kind("", "ConfigMap")
NAMESPACE = kind("", "Namespace")
EVENT = kind("", "Event")
NEW_EVENT = kind("events.orch.io", "Event")
DEPLOYMENT = kind("apps", "Deployment")
CONTROLLER_REVISION = kind("apps", "ControllerRevision")
CLUSTER_ROLE = kind("rbac.authorization.orch.io", "ClusterRole")
CLUSTER_ROLE_BINDING = kind("rbac.authorization.orch.io", "ClusterRoleBinding")
LEASE = kind("coordination.orch.io", "Lease")
JOB = kind("batch", "Job")
CRON_JOB = kind("batch", "CronJob")
HPA = kind("autoscaling", "HorizontalPodAutoscaler")
ENDPOINTS = kind("", "Endpoints")
ENDPOINT_SLICE = kind("discovery.orch.io", "EndpointSlice")
FLOW_SCHEMA = kind("flowcontrol.apiserver.orch.io", "FlowSchema")


class HumanDurationTests(SynchronousTestCase):
    """AGE cells follow upstream's HumanDuration rules."""

    def test_boundaries(self):
        """Each range switches unit at upstream's boundaries."""
        hour, day, year = 3600, 86400, 365 * 86400
        cases = [
            (-2, "<invalid>"), (-1.5, "0s"), (-1, "0s"), (0, "0s"), (59.9, "59s"),
            (119, "119s"), (120, "2m"), (125, "2m5s"), (599, "9m59s"), (600, "10m"),
            (3 * hour - 1, "179m"), (3 * hour, "3h"), (3 * hour + 12 * 60, "3h12m"),
            (8 * hour - 1, "7h59m"), (8 * hour, "8h"), (48 * hour - 1, "47h"), (2 * day, "2d"),
            (2 * day + 3 * hour, "2d3h"), (8 * day - 1, "7d23h"), (8 * day, "8d"),
            (2 * year - 1, "729d"), (2 * year, "2y"), (2 * year + 30 * day, "2y30d"),
            (8 * year - 1, "7y364d"), (8 * year, "8y"), (9 * year + 100 * day, "9y"),
        ]
        for seconds, expected in cases:
            self.assertEqual((seconds, human_duration(seconds)), (seconds, expected))

    def test_age_cell(self):
        """The AGE cell is the time since creationTimestamp."""
        obj = {"metadata": meta("a", created=3 * 3600 + 12 * 60), "data": {}}
        self.assertEqual(cells(CONFIG_MAP, obj)["Age"], "3h12m")

    def test_age_unknown(self):
        """An object without creationTimestamp is of unknown age."""
        self.assertEqual(cells(CONFIG_MAP, {"metadata": {"name": "a"}})["Age"], "<unknown>")

    def test_timestamps(self):
        """Timestamps may carry fractions and offsets; Go's zero time is unset."""
        self.assertEqual(parse_time("2024-05-01T12:00:00Z"), NOW)
        self.assertEqual(parse_time("2024-05-01T14:00:00.5+02:00"), NOW + 0.5)
        self.assertIsNone(parse_time("0001-01-01T00:00:00Z"))
        self.assertIsNone(parse_time("yesterday"))
        self.assertIsNone(parse_time(None))


class ColumnTests(SynchronousTestCase):
    """Column definitions carry upstream's names, types and priorities."""

    def test_pods(self):
        """Pods: NAME READY STATUS RESTARTS AGE, and four wide columns."""
        self.assertEqual(columns(POD), [
            ("Name", "string", 0), ("Ready", "string", 0), ("Status", "string", 0),
            ("Restarts", "string", 0), ("Age", "string", 0), ("IP", "string", 1),
            ("Node", "string", 1), ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
        ])

    def test_nodes(self):
        """Nodes: NAME STATUS ROLES AGE VERSION, then the wide addresses and versions."""
        self.assertEqual([name for name, _, p in columns(NODE) if p == 0],
                         ["Name", "Status", "Roles", "Age", "Version"])
        self.assertEqual([name for name, _, p in columns(NODE) if p == 1],
                         ["Internal-IP", "External-IP", "OS-Image", "Kernel-Version",
                          "Container-Runtime"])

    def test_services(self):
        """Services: NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE, SELECTOR wide."""
        self.assertEqual(columns(SERVICE), [
            ("Name", "string", 0), ("Type", "string", 0), ("Cluster-IP", "string", 0),
            ("External-IP", "string", 0), ("Port(s)", "string", 0), ("Age", "string", 0),
            ("Selector", "string", 1),
        ])

    def test_small_kinds(self):
        """Config maps, secrets, namespaces, leases and controller revisions."""
        self.assertEqual([c[0] for c in columns(CONFIG_MAP)], ["Name", "Data", "Age"])
        self.assertEqual([c[0] for c in columns(SECRET)], ["Name", "Type", "Data", "Age"])
        self.assertEqual([c[0] for c in columns(NAMESPACE)], ["Name", "Status", "Age"])
        self.assertEqual([c[0] for c in columns(LEASE)], ["Name", "Holder", "Age"])
        self.assertEqual([c[0] for c in columns(CONTROLLER_REVISION)],
                         ["Name", "Controller", "Revision", "Age"])

    def test_deployments(self):
        """Deployments: NAME READY UP-TO-DATE AVAILABLE AGE, containers and selector wide."""
        self.assertEqual(columns(DEPLOYMENT), [
            ("Name", "string", 0), ("Ready", "string", 0), ("Up-to-date", "string", 0),
            ("Available", "string", 0), ("Age", "string", 0), ("Containers", "string", 1),
            ("Images", "string", 1), ("Selector", "string", 1),
        ])

    def test_cluster_role_bindings(self):
        """Cluster role bindings: NAME ROLE AGE, subjects wide."""
        self.assertEqual(columns(CLUSTER_ROLE_BINDING), [
            ("Name", "string", 0), ("Role", "string", 0), ("Age", "string", 0),
            ("Users", "string", 1), ("Groups", "string", 1), ("ServiceAccounts", "string", 1),
        ])

    def test_events(self):
        """Both event groups: LAST SEEN TYPE REASON OBJECT MESSAGE, the rest wide."""
        for info in (EVENT, NEW_EVENT):
            self.assertEqual([c[0] for c in columns(info) if c[2] == 0],
                             ["Last Seen", "Type", "Reason", "Object", "Message"])
            self.assertEqual(columns(info)[-1], ("Name", "string", 1))

    def test_default_table(self):
        """Kinds without a printer upstream get Name and Created At (a date)."""
        self.assertEqual(columns(CLUSTER_ROLE), [("Name", "string", 0), ("Created At", "date", 0)])

    def test_definition_fields(self):
        """Each definition has name, type, format, description and priority; the name is "name"."""
        for info in (POD, CLUSTER_ROLE):
            first = tables.column_definitions(info)[0]
            self.assertEqual(set(first), {"name", "type", "format", "description", "priority"})
            self.assertEqual((first["name"], first["format"]), ("Name", "name"))
            self.assertTrue(first["description"])

    def test_every_kind(self):
        """Every served kind has a Name column and one cell per column, even for a bare object."""
        for info in KINDS:
            table = tables.to_table(info, [{"metadata": {"name": "x"}}], NOW)
            definitions = table["columnDefinitions"]
            self.assertIn(("Name", "name"), [(c["name"], c["format"]) for c in definitions])
            self.assertEqual(len(table["rows"][0]["cells"]), len(definitions), info)
            self.assertIn("x", table["rows"][0]["cells"])
            orjson.dumps(table)

    def test_which_kinds_default(self):
        """Exactly the kinds upstream has no printer for get the default table; no printer is idle."""
        defaults = {(k.group, k.kind) for k in KINDS if k.printer is None}
        self.assertEqual(defaults, {
            ("", "Binding"), ("", "LimitRange"),
            ("apiextensions.orch.io", "CustomResourceDefinition"),
            ("authentication.orch.io", "TokenReview"),
            ("authentication.orch.io", "SelfSubjectReview"),
            ("authorization.orch.io", "LocalSubjectAccessReview"),
            ("authorization.orch.io", "SelfSubjectAccessReview"),
            ("authorization.orch.io", "SelfSubjectRulesReview"),
            ("authorization.orch.io", "SubjectAccessReview"),
            ("rbac.authorization.orch.io", "Role"),
            ("rbac.authorization.orch.io", "ClusterRole"),
            ("metrics.orch.io", "NodeMetrics"), ("metrics.orch.io", "PodMetrics"),
        })
        # The Scale of the scale subresources is printed by their connector (registry/scale.py).
        used = {id(k.printer) for k in KINDS} | {id(workloads.SCALE)}
        unused = [name for module in (cluster, core, events, networking, storage, workloads)
                  for name, value in vars(module).items()
                  if isinstance(value, Printer) and id(value) not in used]
        self.assertEqual(unused, [])


def running(name, ready=True, restarts=0, finished=None):
    """A container status, running, with C{restarts} and a last termination."""
    status = {"name": name, "ready": ready, "restartCount": restarts,
              "state": {"running": {"startedAt": ago(600)}}}
    if finished is not None:
        status["lastState"] = {"terminated": {"exitCode": 1, "finishedAt": ago(finished)}}
    return status


def pod(container_statuses, phase="Running", **extra):
    obj = {
        "metadata": meta("web-1"),
        "spec": {"nodeName": "n1", "containers": [{"name": "app"}, {"name": "sidecar"}]},
        "status": {"phase": phase, "podIP": "10.0.0.5", "containerStatuses": container_statuses},
    }
    obj.update(extra)
    return obj


class PodCellTests(SynchronousTestCase):
    """Pod cells follow upstream's printPod."""

    def test_ready_and_restarts(self):
        """READY counts ready running containers; RESTARTS adds the last restart's age."""
        obj = pod([running("app", restarts=2, finished=600),
                   running("sidecar", ready=False, restarts=1, finished=300)])
        row = cells(POD, obj)
        self.assertEqual((row["Ready"], row["Status"], row["Restarts"], row["Age"]),
                         ("1/2", "Running", "3 (5m ago)", "5m"))
        self.assertEqual((row["IP"], row["Node"], row["Nominated Node"], row["Readiness Gates"]),
                         ("10.0.0.5", "n1", "<none>", "<none>"))

    def test_no_restarts(self):
        """Without restarts the cell is a bare zero."""
        self.assertEqual(cells(POD, pod([running("app"), running("sidecar")]))["Restarts"], "0")

    def test_waiting_reason(self):
        """A waiting container's reason is the status."""
        waiting = {"name": "app", "ready": False, "restartCount": 4,
                   "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
        row = cells(POD, pod([waiting, running("sidecar")]))
        self.assertEqual((row["Ready"], row["Status"], row["Restarts"]),
                         ("1/2", "CrashLoopBackOff", "4"))

    def test_initializing(self):
        """An init container still to run shows Init:i/n."""
        obj = pod([], phase="Pending")
        obj["spec"]["initContainers"] = [{"name": "setup"}]
        obj["status"]["initContainerStatuses"] = [
            {"name": "setup", "state": {"waiting": {"reason": "PodInitializing"}}}]
        self.assertEqual(cells(POD, obj)["Status"], "Init:0/1")

    def test_sidecar_counts(self):
        """A started sidecar (restartPolicy Always) counts toward READY."""
        obj = pod([running("app"), running("sidecar")])
        obj["spec"]["initContainers"] = [{"name": "proxy", "restartPolicy": "Always"}]
        obj["status"]["initContainerStatuses"] = [dict(running("proxy"), started=True)]
        self.assertEqual(cells(POD, obj)["Ready"], "3/3")

    def test_terminating(self):
        """A pod being deleted shows Terminating."""
        obj = pod([running("app"), running("sidecar")])
        obj["metadata"]["deletionTimestamp"] = ago(10)
        self.assertEqual(cells(POD, obj)["Status"], "Terminating")

    def test_completed_row_condition(self):
        """A succeeded pod's row carries the Completed condition."""
        done = {"name": "app", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        table = tables.to_table(POD, [pod([done, done], phase="Succeeded")], NOW)
        row = table["rows"][0]
        self.assertEqual(row["cells"][2], "Completed")
        self.assertEqual(row["conditions"], [{"type": "Completed", "status": "True",
                                              "reason": "Succeeded",
                                              "message": "The pod has completed successfully."}])

    def test_readiness_gates(self):
        """Readiness gates count the gate conditions that are true."""
        obj = pod([running("app"), running("sidecar")])
        obj["spec"]["readinessGates"] = [{"conditionType": "a"}, {"conditionType": "b"}]
        obj["status"]["conditions"] = [{"type": "a", "status": "True"},
                                       {"type": "b", "status": "False"}]
        self.assertEqual(cells(POD, obj)["Readiness Gates"], "1/2")


class NodeCellTests(SynchronousTestCase):
    """Node cells: status with SchedulingDisabled, roles, version, addresses."""

    def node(self, ready="True", unschedulable=False):
        return {
            "metadata": meta("n1", created=2 * 86400, labels={
                "node-role.orch.io/control-plane": "", "orch.io/role": "worker"}),
            "spec": {"unschedulable": unschedulable},
            "status": {
                "conditions": [{"type": "MemoryPressure", "status": "False"},
                               {"type": "Ready", "status": ready}],
                "addresses": [{"type": "InternalIP", "address": "192.168.1.10"},
                              {"type": "Hostname", "address": "n1"}],
                "nodeInfo": {"kubeletVersion": "v1.36.0", "osImage": "Debian 12"},
            },
        }

    def test_cordoned(self):
        """A cordoned ready node is Ready,SchedulingDisabled."""
        row = cells(NODE, self.node(unschedulable=True))
        self.assertEqual(row["Status"], "Ready,SchedulingDisabled")
        self.assertEqual((row["Roles"], row["Age"], row["Version"]),
                         ("control-plane,worker", "2d", "v1.36.0"))
        self.assertEqual((row["Internal-IP"], row["External-IP"], row["OS-Image"],
                          row["Kernel-Version"]),
                         ("192.168.1.10", "<none>", "Debian 12", "<unknown>"))

    def test_not_ready(self):
        """A Ready condition that is not True reads NotReady."""
        self.assertEqual(cells(NODE, self.node(ready="Unknown"))["Status"], "NotReady")

    def test_unknown(self):
        """A node without a Ready condition is Unknown, still SchedulingDisabled if cordoned."""
        obj = {"metadata": meta("n2"), "spec": {"unschedulable": True}}
        self.assertEqual(cells(NODE, obj)["Status"], "Unknown,SchedulingDisabled")
        self.assertEqual(cells(NODE, obj)["Roles"], "<none>")


class CoreCellTests(SynchronousTestCase):
    """Cells of secrets, config maps, services, endpoints and namespaces."""

    def test_secret(self):
        """A secret shows its type and the number of data keys (an integer)."""
        obj = {"metadata": meta("tls"), "type": "orch.io/tls",
               "data": {"tls.crt": "", "tls.key": ""}}
        row = cells(SECRET, obj)
        self.assertEqual((row["Type"], row["Data"]), ("orch.io/tls", 2))
        self.assertEqual(cells(SECRET, {"metadata": meta("x")})["Type"], "Opaque")

    def test_config_map(self):
        """DATA counts data and binaryData keys together."""
        obj = {"metadata": meta("cfg"), "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}
        self.assertEqual(cells(CONFIG_MAP, obj)["Data"], 3)

    def test_service(self):
        """PORT(S) lists port/protocol, with the node port when there is one."""
        obj = {"metadata": meta("web"), "spec": {
            "type": "NodePort", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
            "selector": {"app": "web", "tier": "front"},
            "ports": [{"port": 80, "protocol": "TCP"},
                      {"port": 443, "nodePort": 30443, "protocol": "TCP"}]}}
        row = cells(SERVICE, obj)
        self.assertEqual(
            (row["Type"], row["Cluster-IP"], row["External-IP"], row["Port(s)"], row["Selector"]),
            ("NodePort", "10.96.0.10", "<none>", "80/TCP,443:30443/TCP", "app=web,tier=front"))

    def test_load_balancer(self):
        """A load balancer without an address is pending; its addresses come sorted."""
        obj = {"metadata": meta("lb"), "spec": {"type": "LoadBalancer", "ports": []}}
        self.assertEqual(cells(SERVICE, obj)["External-IP"], "<pending>")
        self.assertEqual(cells(SERVICE, obj)["Port(s)"], "<none>")
        obj["status"] = {"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}, {"hostname": "lb.x"}]}}
        self.assertEqual(cells(SERVICE, obj)["External-IP"], "5.6.7.8,lb.x")

    def test_endpoints(self):
        """Endpoints show three host:port pairs, then how many more."""
        obj = {"metadata": meta("web"), "subsets": [{
            "addresses": [{"ip": "10.1.0.1"}, {"ip": "10.1.0.2"}, {"ip": "fd00::3"}],
            "ports": [{"port": 8080}, {"port": 9090}]}]}
        self.assertEqual(cells(ENDPOINTS, obj)["Endpoints"],
                         "10.1.0.1:8080,10.1.0.2:8080,[fd00::3]:8080 + 3 more...")
        self.assertEqual(cells(ENDPOINTS, {"metadata": meta("e")})["Endpoints"], "<none>")

    def test_namespace(self):
        """A namespace shows its phase."""
        obj = {"metadata": meta("dev"), "status": {"phase": "Terminating"}}
        self.assertEqual(cells(NAMESPACE, obj)["Status"], "Terminating")


class EventCellTests(SynchronousTestCase):
    """Both event groups print the same cells from their own field names."""

    def test_same_cells(self):
        """A core event and its events.orch.io twin print alike."""
        core = {
            "metadata": meta("web.17a"), "type": "Warning", "reason": "BackOff",
            "message": "Back-off restarting failed container\n",
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
            "source": {"component": "orchlet", "host": "n1"},
            "firstTimestamp": ago(3600), "lastTimestamp": ago(60), "count": 12,
        }
        new = {
            "metadata": meta("web.17a"), "type": "Warning", "reason": "BackOff",
            "note": "Back-off restarting failed container\n",
            "regarding": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
            "deprecatedSource": {"component": "orchlet", "host": "n1"},
            "deprecatedFirstTimestamp": ago(3600), "deprecatedLastTimestamp": ago(60),
            "deprecatedCount": 12,
        }
        expected = ["60s", "Warning", "BackOff", "pod/web", "spec.containers{app}",
                    "orchlet, n1", "Back-off restarting failed container", "60m", 12, "web.17a"]
        for info, obj in ((EVENT, core), (NEW_EVENT, new)):
            self.assertEqual(tables.to_table(info, [obj], NOW)["rows"][0]["cells"], expected)

    def test_series(self):
        """An event series is as old as its last observation, counted by the series."""
        obj = {"metadata": meta("e"), "eventTime": ago(7200), "reportingController": "sched",
               "series": {"count": 5, "lastObservedTime": ago(30)},
               "regarding": {"kind": "Node"}}
        row = cells(NEW_EVENT, obj)
        self.assertEqual((row["Last Seen"], row["First Seen"], row["Count"], row["Object"],
                          row["Source"]), ("30s", "120m", 5, "node", "sched"))


class WorkloadCellTests(SynchronousTestCase):
    """Cells of deployments, controller revisions, jobs, cron jobs and autoscalers."""

    def test_deployment(self):
        """READY is ready of desired; the selector is printed as selector text."""
        obj = {"metadata": meta("web"), "spec": {
            "replicas": 3, "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "back"]}]},
            "template": {"spec": {"containers": [{"name": "app", "image": "nginx:1"},
                                                 {"name": "log", "image": "busybox"}]}}},
               "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}
        row = cells(DEPLOYMENT, obj)
        self.assertEqual(
            [row[c] for c in ("Ready", "Up-to-date", "Available", "Containers", "Images",
                              "Selector")],
            ["2/3", 3, 2, "app,log", "nginx:1,busybox", "app=web,tier in (back,front)"])

    def test_controller_revision(self):
        """CONTROLLER names the controlling owner as kind.group/name."""
        obj = {"metadata": meta("web-7c9", ownerReferences=[
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": True}]),
            "revision": 2}
        row = cells(CONTROLLER_REVISION, obj)
        self.assertEqual((row["Controller"], row["Revision"]), ("statefulset.apps/web", 2))
        self.assertEqual(cells(CONTROLLER_REVISION, {"metadata": meta("x")})["Controller"],
                         "<none>")

    def test_job(self):
        """A finished job is Complete, with completions and its run time."""
        obj = {"metadata": meta("pi", created=900), "spec": {"completions": 3},
               "status": {"succeeded": 3, "startTime": ago(890), "completionTime": ago(590),
                          "conditions": [{"type": "Complete", "status": "True"}]}}
        row = cells(JOB, obj)
        self.assertEqual((row["Status"], row["Completions"], row["Duration"], row["Age"]),
                         ("Complete", "3/3", "5m", "15m"))

    def test_cron_job(self):
        """A cron job shows schedule, suspension, active jobs and the last schedule."""
        obj = {"metadata": meta("nightly"), "spec": {"schedule": "0 3 * * *", "suspend": True},
               "status": {"active": [{"name": "nightly-1"}], "lastScheduleTime": ago(120)}}
        row = cells(CRON_JOB, obj)
        self.assertEqual(
            [row[c] for c in ("Schedule", "Timezone", "Suspend", "Active", "Last Schedule")],
            ["0 3 * * *", "<none>", "True", 1, "2m"])

    def test_autoscaler(self):
        """TARGETS pairs current and target values of each metric."""
        obj = {"metadata": meta("web"), "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 2,
            "maxReplicas": 10, "metrics": [
                {"type": "Resource", "resource": {
                    "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                {"type": "Pods", "pods": {"target": {"averageValue": "1k"}}}]},
               "status": {"currentReplicas": 3, "currentMetrics": [
                   {"type": "Resource", "resource": {"current": {"averageUtilization": 45}}}]}}
        row = cells(HPA, obj)
        self.assertEqual(
            [row[c] for c in ("Reference", "Targets", "MinPods", "MaxPods", "Replicas")],
            ["Deployment/web", "cpu: 45%/80%, <unknown>/1k", "2", 10, 3])


class ClusterCellTests(SynchronousTestCase):
    """Cells of RBAC bindings, default tables, slices and flow schemas."""

    def test_cluster_role_binding(self):
        """ROLE is kind/name; subjects are split by kind in the wide columns."""
        obj = {"metadata": meta("viewers"),
               "roleRef": {"apiGroup": "rbac.authorization.orch.io", "kind": "ClusterRole",
                           "name": "view"},
               "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"},
                            {"kind": "User", "name": "bob"},
                            {"kind": "ServiceAccount", "name": "ci", "namespace": "tools"}]}
        row = cells(CLUSTER_ROLE_BINDING, obj)
        self.assertEqual([row[c] for c in ("Role", "Users", "Groups", "ServiceAccounts")],
                         ["ClusterRole/view", "alice, bob", "devs", "tools/ci"])

    def test_created_at(self):
        """The default table's Created At is RFC 3339 in UTC, to the second."""
        obj = {"metadata": {"name": "admin", "creationTimestamp": "2024-05-01T14:00:00.25+02:00"}}
        self.assertEqual(cells(CLUSTER_ROLE, obj), {"Name": "admin",
                                                    "Created At": "2024-05-01T12:00:00Z"})
        # Unset, it is Go's zero time, as upstream formats it.
        self.assertEqual(cells(CLUSTER_ROLE, {"metadata": {"name": "x"}})["Created At"],
                         "0001-01-01T00:00:00Z")

    def test_endpoint_slice(self):
        """Slices list three ports and addresses, then how many more."""
        obj = {"metadata": meta("web-abc"), "addressType": "IPv4",
               "ports": [{"port": 80}, {"name": "metrics"}, {}, {"port": 9}],
               "endpoints": [{"addresses": ["10.1.0.1", "10.1.0.2"]}, {"addresses": ["10.1.0.3"]}]}
        row = cells(ENDPOINT_SLICE, obj)
        self.assertEqual((row["AddressType"], row["Ports"], row["Endpoints"]),
                         ("IPv4", "80,metrics,* + 1 more...", "10.1.0.1,10.1.0.2,10.1.0.3"))

    def test_flow_schemas_sorted(self):
        """Flow schemas print in matching order: precedence, then name."""
        objs = [{"metadata": meta(name), "spec": {"matchingPrecedence": precedence,
                                                  "priorityLevelConfiguration": {"name": "pl"}}}
                for name, precedence in (("b", 500), ("c", None), ("a", 500), ("exempt", 1))]
        table = tables.to_table(FLOW_SCHEMA, objs, NOW)
        self.assertEqual([(r["cells"][0], r["cells"][2]) for r in table["rows"]],
                         [("exempt", 1), ("a", 500), ("b", 500), ("c", 1000)])


class TableTests(SynchronousTestCase):
    """The Table envelope: version, metadata, rows' objects, headers."""

    def obj(self):
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": meta("cfg", namespace="dev", labels={"app": "web"}),
                "data": {"a": "1"}}

    def test_envelope(self):
        """A Table is meta.k8s.io, in the version asked for, with list metadata."""
        for version in ("v1", "v1beta1"):
            table = tables.to_table(CONFIG_MAP, [self.obj()], NOW, version=version, list_meta={
                "resourceVersion": "812", "continue": "abc", "remainingItemCount": 4})
            self.assertEqual((table["kind"], table["apiVersion"]),
                             ("Table", f"meta.k8s.io/{version}"))
            self.assertEqual(table["metadata"],
                             {"resourceVersion": "812", "continue": "abc",
                              "remainingItemCount": 4})

    def test_single_object_version(self):
        """Without list metadata, a single object's resourceVersion is the Table's."""
        table = tables.to_table(CONFIG_MAP, [self.obj()], NOW)
        self.assertEqual(table["metadata"], {"resourceVersion": "7"})
        empty = tables.to_table(CONFIG_MAP, [], NOW, list_meta={"resourceVersion": "9"})
        self.assertEqual((empty["metadata"], empty["rows"]), ({"resourceVersion": "9"}, []))

    def test_include_metadata(self):
        """By default each row holds the object's PartialObjectMetadata."""
        for value in ("Metadata", None, ""):
            row = tables.to_table(CONFIG_MAP, [self.obj()], NOW, include_object=value,
                                  version="v1beta1")["rows"][0]
            self.assertEqual(row["object"], {"kind": "PartialObjectMetadata",
                                             "apiVersion": "meta.k8s.io/v1beta1",
                                             "metadata": self.obj()["metadata"]})

    def test_include_object(self):
        """includeObject=Object puts the whole object in the row."""
        row = tables.to_table(CONFIG_MAP, [self.obj()], NOW, include_object="Object")["rows"][0]
        self.assertEqual(row["object"], self.obj())

    def test_include_none(self):
        """includeObject=None leaves the row's object null."""
        row = tables.to_table(CONFIG_MAP, [self.obj()], NOW, include_object="None")["rows"][0]
        self.assertEqual(row, {"cells": ["cfg", 1, "5m"], "object": None})

    def test_without_columns(self):
        """Watch events after the first leave the column definitions out."""
        table = tables.to_table(CONFIG_MAP, [self.obj()], NOW, with_columns=False)
        self.assertNotIn("columnDefinitions", table)
        self.assertEqual(len(table["rows"]), 1)

    def test_unknown_include_object(self):
        """An unknown includeObject value is a 400 with upstream's message."""
        for call in (lambda: tables.validate_include_object("Everything"),
                     lambda: tables.to_table(CONFIG_MAP, [self.obj()], NOW,
                                             include_object="Everything")):
            error = self.assertRaises(StatusError, call)
            self.assertEqual((error.code, error.reason, error.message),
                             (400, "BadRequest", 'unrecognized includeObject value: "Everything"'))

    def test_include_object_values(self):
        """The known includeObject values pass; absent means Metadata."""
        for value in ("None", "Metadata", "Object"):
            self.assertEqual(tables.validate_include_object(value), value)
        self.assertEqual(tables.validate_include_object(None), "Metadata")

    def test_unknown_version(self):
        """A Table version that does not exist is not acceptable."""
        error = self.assertRaises(StatusError, tables.to_table, CONFIG_MAP, [], NOW, version="v2")
        self.assertEqual(error.code, 406)


class NegotiationTests(SynchronousTestCase):
    """Which Accept media ranges ask for a Table."""

    def test_both_groups_and_versions(self):
        """as=Table with either group spelling and either version is a Table."""
        for group in ("meta.k8s.io", "meta.orch.io"):
            for version in ("v1", "v1beta1"):
                params = {"as": "Table", "v": version, "g": group}
                self.assertEqual(tables.wants_table(params), version)

    def test_not_tables(self):
        """Other kinds, groups, versions or a lower-case kind are not Tables."""
        for params in ({}, {"as": "table", "v": "v1", "g": "meta.k8s.io"},
                       {"as": "Table", "v": "v2", "g": "meta.k8s.io"},
                       {"as": "Table", "v": "v1", "g": "meta.example.io"},
                       {"as": "Table", "v": "v1"},
                       {"as": "APIGroupDiscoveryList", "v": "v2", "g": "apidiscovery.k8s.io"}):
            self.assertIsNone(tables.wants_table(params), params)

    def test_media_params(self):
        """The accepted parameter sets are the four group/version pairs, read-only."""
        self.assertEqual([dict(p) for p in tables.TABLE_MEDIA_PARAMS], [
            {"as": "Table", "g": "meta.k8s.io", "v": "v1"},
            {"as": "Table", "g": "meta.k8s.io", "v": "v1beta1"},
            {"as": "Table", "g": "meta.orch.io", "v": "v1"},
            {"as": "Table", "g": "meta.orch.io", "v": "v1beta1"},
        ])
        for params in tables.TABLE_MEDIA_PARAMS:
            self.assertEqual(tables.wants_table(params), params["v"])
        self.assertRaises(TypeError, operator.setitem, tables.TABLE_MEDIA_PARAMS[0], "v", "v2")
        self.assertEqual(tables.table_media_type(),
                         "application/json;as=Table;v=v1;g=meta.k8s.io")
