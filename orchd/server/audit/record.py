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

import orjson

from orchd.api import yamldecode
from orchd.server.audit.policy import COMPLETE, PANIC, REQUEST_RESPONSE
from orchd.timing.seconds import micro_times

#: [COMPAT] tools that read audit logs (and webhook receivers) expect the upstream group.
EVENT_API_VERSION = "audit.k8s.io/v1"
DECISION = "authorization.k8s.io/decision"
REASON = "authorization.k8s.io/reason"

_WRITE_VERBS = frozenset(("create", "update", "patch", "delete", "deletecollection"))
_JSON = frozenset((b"application/json", b"application/merge-patch+json",
                   b"application/json-patch+json", b"application/strategic-merge-patch+json"))
_YAML = frozenset((b"application/yaml", b"application/apply-patch+yaml"))


#: {code: the C{responseStatus} of an answer that is not an error}, one shared dict per code.
_SUCCESS = {}


def _success_status(code):
    status = _SUCCESS[code] = {"metadata": {}, "code": code}
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
    """
    One event as one JSON line (bytes, newline included). A function rather
    than a C{functools.partial} of orjson's: a partial with keywords copies
    them into a new dict on every call, which costs more than the call.
    """
    return orjson.dumps(event, default=encode_default, option=orjson.OPT_APPEND_NEWLINE)


def header_fields(request):
    """
    The request's headers as a dict by their canonical names
    (C{b"User-Agent"}), lists of values, to read and never change: the
    one twisted's C{Headers} keeps, rather than a copy per event (an
    event reads three of them), or a copy where C{Headers} keeps none.
    """
    headers = request.requestHeaders
    fields = getattr(headers, "_rawHeaders", None)
    return fields if type(fields) is dict else dict(headers.getAllRawHeaders())


def source_ips(request, headers):
    """
    X-Forwarded-For, then X-Real-Ip, then the peer, as upstream's C{utilnet.SourceIPs}.

    @param headers: the request's headers as a dict, by their canonical names
        (L{header_fields}).
    """
    forwarded = headers.get(b"X-Forwarded-For")
    real = headers.get(b"X-Real-Ip")
    peer = getattr(request.getClientAddress(), "host", None)
    if forwarded is None and real is None:
        # Nearly every request: no proxy in between.
        return [peer] if peer else []
    ips = []
    for value in forwarded or ():
        for part in value.split(b","):
            _add_ip(ips, part)
    for value in (real or ())[:1]:
        _add_ip(ips, value)
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

    Made once the policy has decided the request's level, it holds what
    the request's events say beyond the request itself; each event is
    built from the request and this record at once, in one dict (most
    requests have one event). What few requests have (an impersonated user,
    an error's status, bodies) starts as the class's default.

    The record does not hold the request: the request holds the record
    (C{request.audit}), and a cycle between them would leave every audited
    request, with its headers and body, for the garbage collector instead
    of reference counting. The request is passed to L{event}.

    @ivar answer: the authorizer's answer, C{(allowed, reason)}, once given
        (L{authorized}); the events show it as upstream's annotations.
    @ivar annotations: the annotations admission plugins added, through
        C{RequestContext.add_audit_annotation} (L{annotate}), or None.
    @ivar status: the Status dict of an error answer, set where errors are written.
    @ivar wants_response: whether the response body is logged (RequestResponse,
        resource requests); the response writer keeps it in C{response}.
    """

    impersonated = None
    status = None
    #: (namespace, name, uid, resourceVersion) read off the request's object.
    object_meta = None
    #: The request's L{Body}, at Request level and above.
    request_body = None
    #: (content type, body) of the response, at RequestResponse level.
    response = None
    wants_response = False
    finished = False
    answer = None
    annotations = None

    def __init__(self, decision):
        self.decision = decision

    def keep_bodies(self, request, info):
        """
        At Request level and above: read the request's body now (twisted.web
        lets it go when the response is finished) and say whether the
        response's is wanted.
        """
        if info.verb in _WRITE_VERBS:
            content = request.content
            content.seek(0)
            data = content.read()
            body = Body(data, request.getHeader(b"content-type"),
                        self.decision.omit_managed_fields)
            if data and body.readable:
                self.request_body = body
        self.wants_response = self.decision.level == REQUEST_RESPONSE

    def authorized(self, allowed, reason):
        """Record the authorizer's answer, as upstream's annotations say it."""
        self.answer = (allowed, reason)

    def annotate(self, key, value):
        """Add an annotation to the events to come."""
        if self.annotations is None:
            self.annotations = {}
        self.annotations[key] = value

    def request_object(self, obj):
        """Note the name, uid and resourceVersion of the object a request sends."""
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            self.object_meta = (meta.get("namespace"), meta.get("name"), meta.get("uid"),
                                meta.get("resourceVersion"))

    def event(self, request, stage, code, now):
        """
        The event of C{stage} (answered with C{code}, or None before an
        answer), at C{now}. The user's dict is shared by every event of the
        connection's user: sinks read events and never change them.
        """
        return self.event_of(request, stage, code, request.audit_id,
                             *micro_times(request.received, now))

    def event_of(self, request, stage, code, audit_id, received, stamp):
        """L{event} with its audit ID and its two MicroTime texts given."""
        info = request.api_info
        user = request.api_user
        # Three lookups by name through twisted.web's Headers cost more.
        headers = header_fields(request)
        event = {
            "kind": "Event",
            "apiVersion": EVENT_API_VERSION,
            "level": self.decision.level,
            "auditID": audit_id,
            "stage": stage,
            "requestURI": request.uri.decode("latin-1"),
            "verb": info.verb,
            "user": user.shared_dict() if user is not None else {},
            "sourceIPs": source_ips(request, headers),
        }
        if self.impersonated is not None:
            event["impersonatedUser"] = self.impersonated.shared_dict()
        agent = headers.get(b"User-Agent")
        if agent:
            event["userAgent"] = agent[-1].decode("utf-8", "replace")
        resource = info.is_resource_request
        if resource:
            ref = {"resource": info.resource}
            if info.namespace:
                ref["namespace"] = info.namespace
            if info.name:
                ref["name"] = info.name
            if info.api_group:
                ref["apiGroup"] = info.api_group
            ref["apiVersion"] = info.api_version
            if info.subresource:
                ref["subresource"] = info.subresource
            if self.object_meta is not None:
                self._add_object_meta(ref)
            event["objectRef"] = ref
        if code is not None:
            status = self.status
            if status is None:
                event["responseStatus"] = _SUCCESS.get(code) or _success_status(code)
            else:
                event["responseStatus"] = {
                    "metadata": {}, "status": status.get("status", "Failure"),
                    "message": status.get("message", ""), "reason": status.get("reason", ""),
                    **({"details": status["details"]} if "details" in status else {}),
                    "code": status.get("code", code)}
            if resource and self.decision.bodies and (stage == COMPLETE or stage == PANIC):
                self._bodies(event)
        event["requestReceivedTimestamp"] = received
        event["stageTimestamp"] = stamp
        if self.answer is not None or self.annotations:
            event["annotations"] = self._annotations()
        return event

    def _annotations(self):
        """The event's annotations as they are now: the authorizer's answer first."""
        annotations = {}
        if self.answer is not None:
            allowed, reason = self.answer
            annotations[DECISION] = "allow" if allowed else "forbid"
            if reason:
                annotations[REASON] = reason
        if self.annotations:
            annotations.update(self.annotations)
        return annotations

    def _add_object_meta(self, ref):
        # A create names its object in the body; a write's object may give
        # its uid and version too.
        namespace, name, uid, version = self.object_meta
        if "namespace" not in ref and isinstance(namespace, str) and namespace:
            ref["namespace"] = namespace
        if "name" not in ref and isinstance(name, str) and name:
            ref["name"] = name
        if isinstance(uid, str) and uid:
            ref["uid"] = uid
        if isinstance(version, str) and version:
            ref["resourceVersion"] = version

    def _bodies(self, event):
        if self.request_body is not None:
            event["requestObject"] = self.request_body
        if self.response is not None:
            body = Body(self.response[1], self.response[0], self.decision.omit_managed_fields)
            if body.readable:
                event["responseObject"] = body
