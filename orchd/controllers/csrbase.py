# -*- test-case-name: tests.controllers.test_csrsigning -*-
"""
What the certificate controllers share: every CertificateSigningRequest in
an informer, a queue of names, and writes through a subresource.

The signer and the approver differ only in which requests they want and
what they write; both write as the control plane, so admission's
approve/sign checks pass them, and a request that changed under them
simply comes round again with its newer version.
"""

import abc
import copy

from orchd.api.errors import StatusError
from orchd.api.kinds import CERTIFICATES
from orchd.controllers.base import QueuedController
from orchd.registry.context import RequestContext
from orchd.storage.interfaces import DELETED

CSRS = "certificatesigningrequests"


class CSRController(QueuedController):
    """
    @ivar manager: the field manager of this controller's writes.
    @ivar started: fires once the informer holds every request (or at once
        when the controller has nothing to do, see L{disabled}).
    """

    manager = "certificate-controller"

    def __init__(self, catalog, clock):
        super().__init__(catalog, clock)
        self._csrs = catalog.resource(CERTIFICATES, CSRS)
        self._informer = self.follow(CERTIFICATES, CSRS, self._changed)

    def disabled(self):
        """Why this controller cannot work, or None."""
        return None

    @abc.abstractmethod
    def wants(self, csr):
        """Whether C{csr} needs this controller's attention."""

    @abc.abstractmethod
    async def handle(self, csr):
        """Act on C{csr} (a copy, which may be changed and written)."""

    def startService(self):
        why = self.disabled()
        if why:
            self.log.info("{name} is idle: {why}", name=self.name, why=why)
            self._informers.clear()
        super().startService()

    def now(self):
        return self._clock.seconds()

    def _changed(self, type, obj, old):
        if type != DELETED and self.wants(obj):
            self._queue.add(obj["metadata"]["name"])

    async def _sync(self, name):
        csr = self._informer.cache.get(self._csrs.info.key("", name))
        if csr is not None and self.wants(csr):
            await self.handle(copy.deepcopy(csr))     # the informer's copy stays as it was

    async def write(self, csr, subresource):
        """
        Write C{csr} through C{subresource}; False when it is gone or changed
        meanwhile (its newer version is queued by the informer).
        """
        ctx = RequestContext(self._catalog.system_context().user, field_manager=self.manager)
        try:
            await self._csrs.update(ctx, csr["metadata"]["name"], csr, subresource=subresource)
        except StatusError as e:
            if e.code in (404, 409):
                return False
            raise
        return True
