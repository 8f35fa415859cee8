# -*- test-case-name: tests.server.test_watch,tests.server.test_bodies -*-
"""The parts of the configuration request handlers read."""

from twisted.internet.defer import maybeDeferred

from orchd.api.features import FeatureGates


class ServerSettings:
    """
    @ivar min_request_timeout: seconds; watches without timeoutSeconds end
        between this and twice this.
    @ivar features: the L{FeatureGates} in force.
    @ivar offload: C{offload(f, *args)} runs CPU-heavy work (decoding a
        large body) off the reactor thread and returns a Deferred of its
        result; by default it runs C{f} at once, as tests want.
    @ivar upstream_group_names: C{--upstream-group-names}: besides the
        C{orch.io} names, discovery and OpenAPI list the renamed groups in
        their upstream (C{k8s.io}) spelling, and what is sent to tools that
        expect upstream names (an C{AdmissionReview}) uses that spelling.
    @ivar metrics: the L{orchd.server.requestmetrics.APIServerMetrics}, or
        None when nothing is counted (the API server sets it).
    """

    __slots__ = ("min_request_timeout", "features", "offload", "upstream_group_names", "metrics")

    def __init__(self, min_request_timeout=1800, features=None, offload=maybeDeferred,
                 upstream_group_names=False):
        self.min_request_timeout = min_request_timeout
        self.features = features or FeatureGates.defaults()
        self.offload = offload
        self.upstream_group_names = upstream_group_names
        self.metrics = None
