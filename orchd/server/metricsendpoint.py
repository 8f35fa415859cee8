# -*- test-case-name: tests.server.test_metricsendpoint -*-
"""
C{/metrics} and C{/metrics/slis}: a registry's families as Prometheus text.

The text is built when scraped, never kept: a scrape costs one pass over
the families, and counting between scrapes costs no formatting. The API
server authorizes both paths as non-resource URLs before they get here;
the scheduler's and controller manager's ports answer them to anyone, as
their health paths.
"""

from orchd.api.metrics import CONTENT_TYPE


def write_metrics(request, registry):
    """Answer C{request} with C{registry}'s exposition."""
    body = registry.expose()
    request.setResponseCode(200)
    request.setHeader(b"content-type", CONTENT_TYPE)
    request.setHeader(b"content-length", b"%d" % len(body))
    if request.method != b"HEAD":
        request.write(body)
    request.finish()


def serve_metrics(request, rest, registry, slis):
    """
    Answer C{/metrics} (C{rest} empty) or C{/metrics/slis}.

    @param rest: the path segments after C{metrics}.
    @param slis: the registry of C{/metrics/slis} (health checks).
    @return: False when the path is neither (the caller answers 404).
    """
    if request.method not in (b"GET", b"HEAD"):
        return False
    if not rest:
        write_metrics(request, registry)
        return True
    if rest == ["slis"] and slis is not None:
        write_metrics(request, slis)
        return True
    return False
