# -*- test-case-name: tests.server.audit.test_record -*-
"""
The audit events of one request, built only when the policy audits it.

An L{AuditRecord} gathers what a request's events say (user, object
reference, authorization decision, admission annotations, status, bodies)
as the request goes through the server, and builds an event dict for each
stage, in upstream's C{audit.k8s.io/v1} C{Event} shape. Bodies are kept as
the bytes that crossed the wire (L{Body}) and decoded only when an event is
encoded, on the log backend's writer thread, so a request pays for a few
dict lookups here and nothing more.
"""

import ipaddress
import time

import orjson

from orchd.api import yamldecode
from orchd.server.audit.policy import (COMPLETE, LEVEL_RANK, METADATA, PANIC, REQUEST,
                                       REQUEST_RESPONSE)
from orchd.timing.seconds import SecondText

#: [COMPAT] tools that read audit logs (and webhook receivers) expect the upstream group.
EVENT_API_VERSION = "audit.k8s.io/v1"
DECISION = "authorization.k8s.io/decision"
REASON = "authorization.k8s.io/reason"

_WRITE_VERBS = frozenset(("create", "update", "patch", "delete", "deletecollection"))
_JSON = frozenset((b"application/json", b"application/merge-patch+json",
                   b"application/json-patch+json", b"application/strategic-merge-patch+json"))
_YAML = frozenset((b"application/yaml", b"application/apply-patch+yaml"))


_utc_second = SecondText(lambda second: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))


def micro_time(seconds):
    """A metav1 MicroTime: C{2021-04-09T07:50:08.137166Z} (UTC, six digits)."""
    return f"{_utc_second(seconds)}.{int((seconds - int(seconds)) * 1e6):06d}Z"


def _success_status(code, _cache={}):
    """C{responseStatus} of an answer that is not an error: one shared dict per code."""
    status = _cache.get(code)
    if status is None:
        status = _cache[code] = {"metadata": {}, "code": code}
    return status


class Body:
    """
    A request or response body as sent, decoded to an object only when encoded.

    In-process sinks (L{orchd.server.audit.interfaces.IAuditSink}) find these
    as the values of C{requestObject} and C{responseObject}; L{decode} gives
    the object (None for a body that is not JSON or YAML).
    """

    __slots__ = ("data", "content_type", "omit_managed_fields")

    def __init__(self, data, content_type, omit_managed_fields=False):
        self.data = data
        # A body sent without a Content-Type is read as JSON by the server
        # (the official Python client sends none on create and update).
        self.content_type = content_type or b"application/json"
        self.omit_managed_fields = omit_managed_fields

    @property
    def media(self):
        return self.content_type.split(b";", 1)[0].strip().lower()

    @property
    def readable(self):
        """Whether the body is JSON or YAML (protobuf bodies are not logged)."""
        media = self.media
        return media in _JSON or media in _YAML

    def decode(self):
        media = self.media
        try:
            if media in _JSON:
                value = orjson.loads(self.data)
            elif media in _YAML:
                value = yamldecode.load(self.data)[0]
            else:
                return None
        except ValueError:
            return None
        if self.omit_managed_fields:
            _drop_managed_fields(value)
        return value


def _drop_managed_fields(value):
    """As upstream's omitManagedFields: from the object, or from each item of a list."""
    if not isinstance(value, dict):
        return
    meta = value.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    items = value.get("items")
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("metadata"), dict):
                item["metadata"].pop("managedFields", None)


def encode_default(value):
    """orjson's C{default}: bodies become their objects."""
    if isinstance(value, Body):
        return value.decode()
    raise TypeError(f"cannot encode {type(value).__name__}")


def encode_event(event):
    """One event as one JSON line (bytes, newline included)."""
    return orjson.dumps(event, default=encode_default, option=orjson.OPT_APPEND_NEWLINE)


def source_ips(request):
    """X-Forwarded-For, then X-Real-Ip, then the peer, as upstream's C{utilnet.SourceIPs}."""
    ips = []
    headers = request.requestHeaders
    for value in headers.getRawHeaders(b"x-forwarded-for", ()):
        for part in value.split(b","):
            _add_ip(ips, part)
    for value in headers.getRawHeaders(b"x-real-ip", ())[:1]:
        _add_ip(ips, value)
    peer = getattr(request.getClientAddress(), "host", None)
    if peer and peer not in ips:
        ips.append(peer)
    return ips


def _add_ip(ips, raw):
    text = raw.strip().decode("latin-1")
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return
    if text not in ips:
        ips.append(text)


class AuditRecord:
    """
    The audit state of one audited request.

    @ivar annotations: the event's annotations; admission plugins add to it
        through C{AdmissionAttributes.add_audit_annotation}.
    @ivar status: the Status dict of an error answer, set where errors are written.
    """

    __slots__ = ("audit_id", "decision", "level", "emit", "now", "uri", "source_ips",
                 "user_agent", "info", "user", "impersonated", "annotations", "status",
                 "received", "object_meta", "request_body", "response", "finished")

    def __init__(self, audit_id, decision, emit, now, request, info, user, received):
        self.audit_id = audit_id
        self.decision = decision
        self.level = decision.level
        self.emit = emit
        self.now = now
        # What the events say of the request is read now and the request not
        # kept: the request holds this record (C{request.audit}), and a cycle
        # between them would leave every audited request, with its headers and
        # body, for the garbage collector instead of reference counting.
        self.uri = request.uri.decode("latin-1")
        self.source_ips = source_ips(request)
        agent = request.getHeader(b"user-agent")
        self.user_agent = agent.decode("utf-8", "replace") if agent else None
        self.info = info
        self.user = user
        self.impersonated = None
        self.annotations = {}
        self.status = None
        self.received = received
        #: (namespace, name, uid, resourceVersion) read off the request's object.
        self.object_meta = None
        #: The request's L{Body}, at Request level and above (read now: twisted.web
        #: lets the body go when the response is finished).
        self.request_body = None
        if LEVEL_RANK[self.level] >= LEVEL_RANK[REQUEST] and info.is_resource_request \
                and info.verb in _WRITE_VERBS:
            content = request.content
            content.seek(0)
            data = content.read()
            body = Body(data, request.getHeader(b"content-type"), decision.omit_managed_fields)
            if data and body.readable:
                self.request_body = body
        #: (content type, body) of the response, at RequestResponse level.
        self.response = None
        self.finished = False

    @property
    def wants_response(self):
        """Whether the response body is logged (RequestResponse, resource requests)."""
        return self.level == REQUEST_RESPONSE and self.info.is_resource_request

    def authorized(self, allowed, reason):
        """Record the authorizer's answer, as upstream's annotations say it."""
        self.annotations[DECISION] = "allow" if allowed else "forbid"
        if reason:
            self.annotations[REASON] = reason

    def request_object(self, obj):
        """Note the name, uid and resourceVersion of the object a request sends."""
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            self.object_meta = (meta.get("namespace"), meta.get("name"), meta.get("uid"),
                                meta.get("resourceVersion"))

    def stage(self, stage, code=None):
        """Emit the event of C{stage} unless the policy leaves it out."""
        if stage in self.decision.omit_stages:
            return
        self.emit(self._event(stage, code))

    def _event(self, stage, code):
        # Every audited request comes here at least once: the event is built
        # in one literal, and what does not change within a request (the
        # user's dict, the source IPs, a success's status) is shared, not
        # copied; sinks read events and never change them.
        info = self.info
        user = self.user
        event = {
            "kind": "Event",
            "apiVersion": EVENT_API_VERSION,
            "level": self.level,
            "auditID": self.audit_id,
            "stage": stage,
            "requestURI": self.uri,
            "verb": info.verb,
            "user": user.shared_dict() if user is not None else {},
        }
        if self.impersonated is not None:
            event["impersonatedUser"] = self.impersonated.shared_dict()
        event["sourceIPs"] = self.source_ips
        if self.user_agent:
            event["userAgent"] = self.user_agent
        resource = info.is_resource_request
        if resource:
            event["objectRef"] = self._object_ref()
        if code is not None:
            status = self.status
            if status is None:
                event["responseStatus"] = _success_status(code)
            else:
                event["responseStatus"] = {
                    "metadata": {}, "status": status.get("status", "Failure"),
                    "message": status.get("message", ""), "reason": status.get("reason", ""),
                    **({"details": status["details"]} if "details" in status else {}),
                    "code": status.get("code", code)}
            if resource and self.level != METADATA and (stage == COMPLETE or stage == PANIC):
                self._bodies(event)
        event["requestReceivedTimestamp"] = micro_time(self.received)
        event["stageTimestamp"] = micro_time(self.now())
        if self.annotations:
            # The last event may share them; an earlier one sees them as they were.
            event["annotations"] = (self.annotations if self.finished
                                    else dict(self.annotations))
        return event

    def _object_ref(self):
        info = self.info
        ref = {"resource": info.resource}
        namespace, name = info.namespace, info.name
        uid = version = None
        if self.object_meta is not None:
            given_ns, given_name, uid, version = self.object_meta
            namespace = namespace or (given_ns if isinstance(given_ns, str) else "")
            name = name or (given_name if isinstance(given_name, str) else "")
        if namespace:
            ref["namespace"] = namespace
        if name:
            ref["name"] = name
        if isinstance(uid, str) and uid:
            ref["uid"] = uid
        if info.api_group:
            ref["apiGroup"] = info.api_group
        ref["apiVersion"] = info.api_version
        if isinstance(version, str) and version:
            ref["resourceVersion"] = version
        if info.subresource:
            ref["subresource"] = info.subresource
        return ref

    def _bodies(self, event):
        if self.request_body is not None:
            event["requestObject"] = self.request_body
        if self.response is not None:
            body = Body(self.response[1], self.response[0], self.decision.omit_managed_fields)
            if body.readable:
                event["responseObject"] = body
