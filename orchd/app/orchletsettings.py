# -*- test-case-name: tests.orchlet.test_auth,tests.orchlet.test_service -*-
"""
The node agent's settings, built from the application's L{Config}.

The node agent gets an L{OrchletSettings} and never reads C{Config}: the
flags it shares with the API server (C{--anonymous-auth},
C{--authorization-mode}, ...) are resolved here, the one place that knows
both.
"""

from orchd.app.config import DEFAULT_AUTHORIZATION_MODE, ConfigError
from orchd.orchlet.auth import ALWAYS_ALLOW, MODES
from orchd.orchlet.settings import OrchletSettings, SimulatedNodeSettings


def settings_from_config(config):
    """
    The orchlet's C{(anonymous, token_webhook, mode)} from the start-up settings.

    The C{orchlet-} settings win. Unset, C{--orchlet-anonymous-auth} follows
    C{--anonymous-auth} (default true) in every process: anonymous access
    is one switch, and whoever turns it off on the API server must not find
    the node agent's logs and stats open. The webhook and the mode follow
    their unprefixed twins with C{--orchlet-only} (no API server runs to own
    those) and take the defaults otherwise; C{--authorization-mode} left at
    its API-server default means AlwaysAllow.

    @raise ConfigError: for an orchlet-only C{--authorization-mode} the
        orchlet does not have.
    """
    only = config.orchlet_only
    anonymous = config.orchlet_anonymous_auth
    if anonymous is None:
        anonymous = config.anonymous_auth
    token_webhook = config.orchlet_authentication_token_webhook
    if token_webhook is None:
        token_webhook = config.authentication_token_webhook if only else False
    mode = config.orchlet_authorization_mode
    if mode is None:
        mode = ALWAYS_ALLOW
        modes = tuple(config.authorization_mode)
        if only and modes != tuple(DEFAULT_AUTHORIZATION_MODE.split(",")):
            if len(modes) != 1 or modes[0] not in MODES:
                raise ConfigError(f"--authorization-mode={','.join(modes)}: the node agent "
                                  f"(--orchlet-only) accepts only {' or '.join(MODES)}")
            mode = modes[0]
    return anonymous, token_webhook, mode


def orchlet_settings(config):
    """
    The L{OrchletSettings} of C{config} (a L{orchd.app.config.Config}).

    @raise ConfigError: as L{settings_from_config}.
    """
    anonymous, token_webhook, mode = settings_from_config(config)
    return OrchletSettings(
        node_name=config.node_name,
        root_dir=config.root_dir,
        bind_address=config.bind_address,
        port=config.orchlet_port,
        orchconfig=config.orchconfig,
        server=config.server,
        bootstrap_token=config.bootstrap_token,
        feature_gates=config.feature_gates,
        anonymous=anonymous,
        token_webhook=token_webhook,
        authorization_mode=mode,
    )


def simulated_node_settings(config):
    """The L{SimulatedNodeSettings} of C{config}, or None when it asks for none."""
    if not config.simulated_nodes:
        return None
    return SimulatedNodeSettings(count=config.simulated_nodes, base_name=config.node_name,
                                 root_dir=config.root_dir, address=config.bind_address,
                                 capacity=config.simulated_node_capacity,
                                 endpoint=orchlet_settings(config),
                                 orchconfig=config.orchconfig if config.orchlet_only else None)
