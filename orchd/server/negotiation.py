# -*- test-case-name: tests.server.test_watch -*-
"""
The response format a request asks for in its Accept header.

Plain JSON (or YAML for answers that are not streams); watches get an
encoder of event frames from the same choice, shared by every watcher that
made it, so each change is encoded once per format.
"""

import orjson

from orchd.api import codecs


class JSONFrames:
    """Encodes one watch event as a JSON line."""

    key = "json"

    def __call__(self, type, obj):
        return b'{"type":"%s","object":%s}\n' % (type.encode("ascii"), orjson.dumps(obj))


_JSON_FRAMES = JSONFrames()


def response_format(scope, watching=False):
    """
    @return: C{(content type, frame encoder)}.
    @raise StatusError: 406 when nothing acceptable is on offer.
    """
    offers = (codecs.JSON,) if watching else (codecs.JSON, codecs.YAML)
    media = codecs.negotiate(scope.request.getHeader(b"accept"), offers)
    return media.encode("ascii"), _JSON_FRAMES
