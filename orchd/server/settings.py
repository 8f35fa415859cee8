"""The parts of the configuration request handlers read."""

from orchd.api.features import FeatureGates


class ServerSettings:
    """
    @ivar min_request_timeout: seconds; watches without timeoutSeconds end
        between this and twice this.
    @ivar features: the L{FeatureGates} in force.
    """

    __slots__ = ("min_request_timeout", "features")

    def __init__(self, min_request_timeout=1800, features=None):
        self.min_request_timeout = min_request_timeout
        self.features = features or FeatureGates.defaults()
