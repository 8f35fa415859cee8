# -*- test-case-name: tests.server.test_proxy,tests.integration.test_orchlet_agent -*-
"""A request body already in memory, for twisted.web's Agent."""

from twisted.internet.defer import succeed
from twisted.web.iweb import IBodyProducer
from zope.interface import implementer


@implementer(IBodyProducer)
class BytesProducer:
    """
    Writes its bytes at once when the request starts (FileBodyProducer
    would run a cooperator task per request for the same result).
    """

    def __init__(self, data):
        self.data = data
        self.length = len(data)

    def startProducing(self, consumer):
        consumer.write(self.data)
        return succeed(None)

    def pauseProducing(self):
        pass

    def resumeProducing(self):
        pass

    def stopProducing(self):
        pass
