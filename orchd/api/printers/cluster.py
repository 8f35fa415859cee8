# -*- test-case-name: tests.api.test_tables -*-
"""
Printers of the cluster-administration groups: RBAC bindings, leases,
certificate signing requests, priority and runtime classes, API priority
and fairness, admission webhooks and API services, after upstream's
C{printers.go} and the aggregator's API service table.

Roles and cluster roles, and custom resource definitions, have no printer
upstream (C{kubectl get clusterroles} shows NAME and CREATED AT), so they
get the default table.
"""

from orchd.api.printers.base import (
    BOOLEAN, INTEGER, STRING, Column, Printer, age_column, as_dict, as_list, condition, count,
    field, human_duration, name_column,
)

# -- RBAC ------------------------------------------------------------------------


def _role_ref(row):
    ref = as_dict(row.get("roleRef"))
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


def _subjects(kind):
    """The subjects of one kind, as upstream's C{SubjectsStrings} lists them."""
    def cell(row):
        names = []
        for subject in as_list(row.get("subjects")):
            subject = as_dict(subject)
            if subject.get("kind") != kind:
                continue
            if kind == "ServiceAccount":
                names.append(f"{subject.get('namespace', '')}/{subject.get('name', '')}")
            else:
                names.append(subject.get("name", ""))
        return ", ".join(names)
    return cell


def _binding_printer(what):
    return Printer(
        name_column(),
        Column("Role", STRING, "The role the binding grants.", _role_ref),
        age_column(),
        Column("Users", STRING, f"Users in the {what}", _subjects("User"), priority=1),
        Column("Groups", STRING, f"Groups in the {what}", _subjects("Group"), priority=1),
        Column("ServiceAccounts", STRING, f"ServiceAccounts in the {what}",
               _subjects("ServiceAccount"), priority=1),
    )


ROLE_BINDING = _binding_printer("roleBinding")
CLUSTER_ROLE_BINDING = _binding_printer("clusterRoleBinding")

# -- coordination ----------------------------------------------------------------

LEASE = Printer(
    name_column(),
    Column("Holder", STRING, "The identity of the current holder of the lease.",
           field("spec", "holderIdentity")),
    age_column(),
)

LEASE_CANDIDATE = Printer(
    name_column(),
    Column("LeaseName", STRING, "The lease the candidate runs for.", field("spec", "leaseName")),
    Column("BinaryVersion", STRING, "The binary version of the candidate.",
           field("spec", "binaryVersion")),
    Column("EmulationVersion", STRING, "The emulation version of the candidate.",
           field("spec", "emulationVersion")),
    age_column(),
)

# -- certificates ----------------------------------------------------------------


def _csr_condition(row):
    """C{Pending}, C{Approved} or C{Denied}, then C{,Failed} and C{,Issued} as they apply."""
    types = {as_dict(c).get("type") for c in as_list(row.get("status", "conditions"))}
    if "Denied" in types:
        status = "Denied"
    elif "Approved" in types:
        status = "Approved"
    else:
        status = "Pending"
    if "Failed" in types:
        status += ",Failed"
    if row.get("status", "certificate"):
        status += ",Issued"
    return status


def _requested_duration(row):
    seconds = row.get("spec", "expirationSeconds")
    return "<none>" if seconds is None else human_duration(seconds)


CERTIFICATE_SIGNING_REQUEST = Printer(
    name_column(),
    age_column(),
    Column("SignerName", STRING, "The signer the request is addressed to.",
           lambda row: row.get("spec", "signerName") or "<none>"),
    Column("Requestor", STRING, "The user who created the request.", field("spec", "username")),
    Column("RequestedDuration", STRING, "The validity the request asks for.",
           _requested_duration),
    Column("Condition", STRING, "The approval state of the request.", _csr_condition),
)

# -- scheduling and node ----------------------------------------------------------

PRIORITY_CLASS = Printer(
    name_column(),
    Column("Value", INTEGER, "The priority of pods of this class.", field("value", default=0)),
    Column("Global-Default", BOOLEAN, "Whether pods without a class get this one.",
           field("globalDefault", default=False)),
    age_column(),
    # No priority upstream: kubectl shows it by default.
    Column("PreemptionPolicy", STRING, "Whether pods of this class may preempt others.",
           field("preemptionPolicy", default="PreemptLowerPriority")),
)

RUNTIME_CLASS = Printer(
    name_column(),
    Column("Handler", STRING, "The container runtime configuration that runs the pods.",
           field("handler")),
    age_column(),
)

# -- API priority and fairness ----------------------------------------------------


def _matching_precedence(row):
    return row.get("spec", "matchingPrecedence") or 1000


def _missing_priority_level(row):
    cond = condition(row.get("status", "conditions"), "Dangling")
    return "?" if cond is None else cond.get("status", "")


FLOW_SCHEMA = Printer(
    name_column(),
    Column("PriorityLevel", STRING, "The priority level requests of this schema go to.",
           field("spec", "priorityLevelConfiguration", "name")),
    Column("MatchingPrecedence", STRING, "Lower values are matched first.", _matching_precedence),
    Column("DistinguisherMethod", STRING, "How requests are split into flows.",
           field("spec", "distinguisherMethod", "type", default="<none>")),
    age_column(),
    Column("MissingPL", STRING, "references a broken or non-existent PriorityLevelConfiguration",
           _missing_priority_level),
    # Upstream prints a list of flow schemas in the order they are matched.
    order=lambda obj: (as_dict(obj.get("spec")).get("matchingPrecedence") or 1000,
                       as_dict(obj.get("metadata")).get("name", "")),
)


def _limited(key, default):
    """A cell of a limited priority level (with its default), C{<none>} for exempt ones."""
    def cell(row):
        limited = row.get("spec", "limited")
        if not isinstance(limited, dict):
            return "<none>"
        if key == "nominalConcurrencyShares":
            # v1beta2 calls it assuredConcurrencyShares.
            return (limited.get("nominalConcurrencyShares")
                    or limited.get("assuredConcurrencyShares") or default)
        queuing = as_dict(limited.get("limitResponse")).get("queuing")
        if not isinstance(queuing, dict):
            return "<none>"
        return queuing.get(key) or default
    return cell


PRIORITY_LEVEL_CONFIGURATION = Printer(
    name_column(),
    Column("Type", STRING, "Exempt or Limited.", field("spec", "type")),
    Column("NominalConcurrencyShares", STRING, "The share of the server's concurrency.",
           _limited("nominalConcurrencyShares", 30)),
    Column("Queues", STRING, "The number of queues.", _limited("queues", 64)),
    Column("HandSize", STRING, "The number of queues a flow is shuffled over.",
           _limited("handSize", 8)),
    Column("QueueLengthLimit", STRING, "The longest a queue may get.",
           _limited("queueLengthLimit", 50)),
    age_column(),
)

# -- admission and API services ---------------------------------------------------


def _webhook_printer():
    return Printer(
        name_column(),
        Column("Webhooks", INTEGER,
               "Webhooks indicates the number of webhooks registered in this configuration",
               count("webhooks")),
        age_column(),
    )


def _api_service(row):
    service = row.get("spec", "service")
    if not isinstance(service, dict):
        return "Local"
    return f"{service.get('namespace', '')}/{service.get('name', '')}"


def _api_service_available(row):
    cond = condition(row.get("status", "conditions"), "Available")
    if cond is None:
        return "Unknown"
    status = cond.get("status", "")
    if status != "True" and cond.get("reason"):
        return f"{status} ({cond['reason']})"
    return status


API_SERVICE = Printer(
    name_column(),
    Column("Service", STRING, "The reference to the service that hosts this API endpoint.",
           _api_service),
    Column("Available", STRING, "Whether this service is available.", _api_service_available),
    age_column(),
)

MUTATING_WEBHOOK_CONFIGURATION = _webhook_printer()
VALIDATING_WEBHOOK_CONFIGURATION = _webhook_printer()
