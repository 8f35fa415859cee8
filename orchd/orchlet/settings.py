# -*- test-case-name: tests.orchlet.test_service -*-
"""
The node agent's settings: what it needs of the start-up configuration.

The application reads flags and files into its C{Config}, and builds this
smaller object from it (L{orchd.app.orchletsettings}), so the node agent
sits above the layers it uses and below the application, and never reads
the application's configuration itself. Values come already checked and
resolved: the agent's authentication and authorization are decided here,
not re-derived from the API server's flags.
"""

import attr


@attr.s(frozen=True, slots=True, kw_only=True)
class OrchletSettings:
    """
    Every field is required: the defaults are the application's, in one place.

    @ivar node_name: the Node this agent registers and serves.
    @ivar root_dir: the agent's directory: credentials, pods, logs.
    @ivar bind_address: the IP address the endpoint listens on and reports.
    @ivar port: the endpoint's TLS port; 0 picks a free one.
    @ivar orchconfig: with C{--orchlet-only}, the client configuration
        naming the API server (None: an earlier join's, or join now).
    @ivar server: the API server URL a join reads C{cluster-info} from.
    @ivar bootstrap_token: the token to join with, or None.
    @ivar feature_gates: a L{orchd.api.features.FeatureGates}.
    @ivar anonymous: whether unauthenticated requests are C{system:anonymous}.
    @ivar token_webhook: whether bearer tokens are checked with a TokenReview.
    @ivar authorization_mode: C{"AlwaysAllow"} or C{"Webhook"}
        (L{orchd.orchlet.auth.MODES}).
    """

    node_name = attr.ib()
    root_dir = attr.ib()
    bind_address = attr.ib()
    port = attr.ib()
    orchconfig = attr.ib()
    server = attr.ib()
    bootstrap_token = attr.ib(repr=False)
    feature_gates = attr.ib()
    anonymous = attr.ib()
    token_webhook = attr.ib()
    authorization_mode = attr.ib()


@attr.s(frozen=True, slots=True, kw_only=True)
class SimulatedNodeSettings:
    """
    The simulated nodes of one process (L{orchd.orchlet.simnodes}).

    @ivar count: how many.
    @ivar base_name: the local node's name; node C{i} is C{<base_name>-sim-<i>}.
    @ivar root_dir: the local node agent's root directory; each simulated
        node keeps its credentials under C{<root_dir>/simulated/<name>}.
    @ivar address: the address each reports as its InternalIP.
    @ivar capacity: C{((resource, quantity), ...)}, capacity and allocatable.
    @ivar endpoint: the local node's L{OrchletSettings}: each simulated node
        serves its HTTPS endpoint with the same authentication and
        authorization, on a port of its own.
    @ivar orchconfig: with C{--orchlet-only}, the client configuration naming
        the API server and the credentials the nodes' certificates are asked
        for with; None beside the API server.
    """

    count = attr.ib()
    base_name = attr.ib()
    root_dir = attr.ib()
    address = attr.ib()
    capacity = attr.ib()
    endpoint = attr.ib()
    orchconfig = attr.ib(default=None)
