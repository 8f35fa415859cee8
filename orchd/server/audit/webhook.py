# -*- test-case-name: tests.server.audit.test_webhook -*-
"""
The audit webhook backend: events POSTed in batches as an C{EventList}.

As upstream's batch mode: events wait in a bounded buffer (past it they are
dropped and counted), and a batch leaves when it holds
C{--audit-webhook-batch-max-size} events or its oldest has waited
C{--audit-webhook-batch-max-wait}. One batch is in flight at a time; a
failure (no connection, a timeout, HTTP 429 or 5xx) is retried after
C{--audit-webhook-initial-backoff}, then 1.5 times longer each time, five
tries in all. A request never waits for any of it. The batch is encoded on
a worker thread, and a clean stop sends what is buffered (one try each).
"""

import collections

import orjson
from OpenSSL import crypto
from twisted.application.service import Service
from twisted.internet.defer import CancelledError, Deferred, TimeoutError, maybeDeferred
from twisted.logger import Logger
from twisted.web.client import HTTPConnectionPool
from zope.interface import implementer

from orchd.client.connect import client_from_orchconfig
from orchd.client.orchconfig import OrchConfigError, load_orchconfig
from orchd.server.audit.interfaces import IAuditSink
from orchd.server.audit.record import EVENT_API_VERSION, encode_default

#: Upstream's defaults.
BUFFER_SIZE = 10000
MAX_SIZE = 400
MAX_WAIT = 30.0
INITIAL_BACKOFF = 10.0
BACKOFF_FACTOR = 1.5
TRIES = 5
TIMEOUT = 30.0
_HEADERS = {b"content-type": [b"application/json"], b"accept": [b"application/json"]}


class WebhookRefused(Exception):
    """The receiver answered with an error code."""

    def __init__(self, code):
        super().__init__(f"the receiver answered HTTP {code}")
        self.code = code


def encode_batch(events):
    """An C{audit.k8s.io/v1} C{EventList} of C{events}, as JSON bytes."""
    return orjson.dumps({"kind": "EventList", "apiVersion": EVENT_API_VERSION,
                         "metadata": {}, "items": events}, default=encode_default)


def _inline(f, *args):
    return maybeDeferred(f, *args)


@implementer(IAuditSink)
class WebhookBackend(Service):
    """
    @param client: a treq-like client (C{post(url, data=, headers=)}).
    @param clock: an C{IReactorTime}.
    @param offload: C{offload(f, *args)} -> a Deferred of C{f(*args)} off the
        reactor thread (L{orchd.server.offload.Offload}); inline by default.
    @ivar dropped: events dropped (buffer full, or a batch given up on).
    @ivar sent: events the receiver accepted.
    """

    log = Logger()

    def __init__(self, client, url, clock, max_size=MAX_SIZE, max_wait=MAX_WAIT,
                 buffer_size=BUFFER_SIZE, initial_backoff=INITIAL_BACKOFF, offload=None,
                 pool=None):
        self._client = client
        self._url = url
        self._clock = clock
        self._max_size = max(1, max_size)
        self._max_wait = max_wait
        self._buffer_size = buffer_size
        self._initial_backoff = initial_backoff
        self._offload = offload or _inline
        self._pool = pool
        self._buffer = collections.deque()
        self._timer = None
        self._sending = None
        self._backoff = None
        self._stopping = False
        self.dropped = 0
        self.sent = 0

    @classmethod
    def from_config_file(cls, path, reactor, **kwargs):
        """
        A backend for the receiver in the kubeconfig-format file at C{path}
        (server URL, CA, client certificate and key).

        @raise ValueError: one line naming the file.
        """
        try:
            url = load_orchconfig(path).server
        except OrchConfigError as error:
            raise ValueError(f"audit webhook config {error}") from None
        if not url.startswith(("https://", "http://")):
            raise ValueError(f"audit webhook config {path}: server {url!r} is not an https:// "
                             f"or http:// URL")
        pool = HTTPConnectionPool(reactor, persistent=True)
        try:
            client, _ = client_from_orchconfig(path, reactor, pool)
        except (ValueError, crypto.Error) as error:
            raise ValueError(f"audit webhook config {path}: unusable TLS credentials: "
                             f"{error}") from None
        return cls(client, url, reactor, pool=pool, **kwargs)

    def write(self, event):
        if self._stopping or len(self._buffer) >= self._buffer_size:
            self._drop(1)
            return
        self._buffer.append(event)
        if self._sending is not None:
            return
        if len(self._buffer) >= self._max_size:
            self._send_soon()
        elif self._timer is None:
            self._timer = self._clock.callLater(self._max_wait, self._send)

    def _drop(self, count):
        first = self.dropped == 0
        self.dropped += count
        if first or self.dropped // 10000 != (self.dropped - count) // 10000:
            self.log.warn("Audit webhook: {dropped} events dropped so far", dropped=self.dropped)

    def _send_soon(self):
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        self._send()

    def _send(self):
        self._timer = None
        if self._sending is not None or not self._buffer:
            return
        batch = [self._buffer.popleft() for _ in range(min(self._max_size, len(self._buffer)))]
        tries = 1 if self._stopping else TRIES
        self._sending = Deferred.fromCoroutine(self._deliver(batch, tries))
        self._sending.addBoth(self._sent)

    def _sent(self, result):
        self._sending = None
        if hasattr(result, "check"):
            self.log.failure("Audit webhook: a batch failed unexpectedly", result)
        if self._stopping or len(self._buffer) >= self._max_size:
            self._send()
        elif self._buffer and self._timer is None:
            self._timer = self._clock.callLater(self._max_wait, self._send)

    async def _deliver(self, batch, tries):
        body = await self._offload(encode_batch, batch)
        delay = self._initial_backoff
        for attempt in range(1, tries + 1):
            try:
                await self._post(body)
                self.sent += len(batch)
                return
            except CancelledError:
                raise
            except WebhookRefused as e:
                if e.code != 429 and e.code < 500:
                    error = e
                    break
                error = e
            except Exception as e:
                error = e
            if attempt < tries and not self._stopping:
                self.log.info("Audit webhook: sending {count} events failed ({error}); "
                              "retrying in {delay:.1f}s", count=len(batch), error=error,
                              delay=delay)
                wait = Deferred()
                self._backoff = (self._clock.callLater(delay, wait.callback, None), wait)
                await wait
                self._backoff = None
                delay *= BACKOFF_FACTOR
            elif attempt < tries:
                break
        self.log.error("Audit webhook: gave up on {count} events: {error}", count=len(batch),
                       error=error)
        self._drop(len(batch))

    async def _post(self, body):
        d = self._client.post(self._url, data=body, headers=_HEADERS)
        d.addTimeout(TIMEOUT, self._clock)
        try:
            response = await d
            await response.content()
        except TimeoutError:
            raise TimeoutError(f"no answer within {TIMEOUT:g}s") from None
        if not 200 <= response.code < 300:
            raise WebhookRefused(response.code)

    async def _stop(self):
        self._stopping = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if self._backoff is not None and self._backoff[0].active():
            # A batch waiting to retry gets its last try now.
            self._backoff[0].cancel()
            self._backoff[1].callback(None)
        while self._sending is not None or self._buffer:
            if self._sending is None:
                self._send()
                continue
            waiting = Deferred()
            self._sending.addBoth(lambda result: (waiting.callback(None), result)[1])
            await waiting
        if self._pool is not None:
            await self._pool.closeCachedConnections()

    def stopService(self):
        """Send what is buffered (one try per batch, retries are already waiting)."""
        super().stopService()
        return Deferred.fromCoroutine(self._stop())
