# -*- test-case-name: tests.orchlet.test_events -*-
"""
Events from a node agent, written to the API server over HTTPS.

The controllers' recorder (L{orchd.controllers.events.EventRecorder})
already correlates events as client-go does (a spam filter, aggregation of
similar events, a repeat raising the count of the event written before);
this one only writes through the node's own client, as C{system:node:<name>},
whose static rules allow creating and patching events. Events are
best-effort: a refusal is logged, never raised.
"""

from twisted.internet.defer import Deferred, DeferredList

from orchd.controllers.events import EventRecorder

#: C{source.component} and C{reportingComponent} of the node agent's events
#: (upstream's kubelet).
COMPONENT = "orchlet"


class APIEventRecorder(EventRecorder):
    """
    Records core/v1 Events through C{api} as the node C{node_name}.

    @param api: an L{orchd.orchlet.apiclient.APIClient} (C{request}).
    """

    def __init__(self, clock, api, node_name, **kwargs):
        super().__init__(None, clock, COMPONENT, node_name, **kwargs)
        self._api = api
        self._stopped = False
        self._inflight = set()

    def stop(self):
        """
        Write nothing more (events recorded from now on are dropped); a
        Deferred that fires once the writes under way have ended, so that
        the node's connections can be closed after.
        """
        self._stopped = True
        return DeferredList(list(self._inflight), consumeErrors=True)

    async def _send(self, event, repeat):
        meta = event["metadata"]
        base = f"/api/v1/namespaces/{meta['namespace']}/events"
        if repeat:
            code, body = await self._call(
                "PATCH", f"{base}/{meta['name']}",
                {"count": event["count"], "lastTimestamp": event["lastTimestamp"],
                 "message": event["message"]},
                content_type="application/merge-patch+json")
            if code == 200:
                return
            if code != 404:
                self._refused(event, code, body)
                return
            # Expired or deleted meanwhile: written again, count included (as upstream).
        code, body = await self._call("POST", base, event)
        if code not in (200, 201):
            self._refused(event, code, body)

    async def _call(self, method, path, body, content_type="application/json"):
        if self._stopped:
            return 0, "the node agent is stopping"
        request = Deferred.fromCoroutine(
            self._api.request(method, path, body, content_type=content_type))
        self._inflight.add(request)
        try:
            return await request
        except Exception as e:
            return 0, str(e)
        finally:
            self._inflight.discard(request)

    def _refused(self, event, code, body):
        ref = event["involvedObject"]
        message = body.get("message", body) if isinstance(body, dict) else body
        # A namespace being terminated, or a name taken: expected, not worth a warning.
        report = self.log.debug if code in (403, 409) else self.log.warn
        report("Event {reason} about {kind} {name} not written: {code} {error}",
               reason=event["reason"], kind=ref.get("kind"), name=ref.get("name"), code=code,
               error=message)
