# -*- test-case-name: tests.app.test_config -*-
"""
The one place start-up settings are read: flags over C{--config} YAML over defaults.

L{Config} is frozen and holds every setting already checked and converted
(ports are ints, durations float seconds, lists tuples, feature gates a
L{FeatureGates}), so the rest of orchd never sees raw flag text and never
re-validates. Each field's metadata names its flag, its parser and its help
text; C{orchd.app.tap.Options} and C{conf/orchd.yaml} are built from, or
tested against, that one table.

A bad value raises L{ConfigError} with a one-line message naming where the
value came from; C{Options.parseOptions} prints it and exits.
"""

import os
import socket

import attr

from orchd.api import yamldecode

from orchd.api.features import describe_gates
from orchd.server.audit.policy import AuditPolicyError, Policy
from orchd.app.values import (  # noqa: F401 (the upper-case names and parse_* are re-exported)
    AUTHORIZATION_MODES, DEFAULT_AUTHORIZATION_MODE, parse_bool, parse_duration,
    _authorization_modes, _bootstrap_token, _cidr, _controllers, _etcd_servers, _feature_gates,
    _https_url, _interval, _ip_address, _items, _node_name, _non_negative,
    _orchlet_authorization_mode, _port, _resource_list, _runtime_config, _simulated_nodes,
    _storage_backend, _string, _webhook_version, _audit_log_format, _log_format,
)

_META = "orchd"


class ConfigError(ValueError):
    """A setting is invalid; the message is one line, fit to show the user."""


class _Setting:
    """Field metadata: the flag's name, the parser of raw values, help and shown default."""

    def __init__(self, parse, default_text, help_text):
        self.parse = parse
        self.default_text = default_text
        self.help = help_text
        self.flag = None          # filled in from the attribute name
        self.attribute = None


def _setting(parse, default_text, help_text, default=attr.NOTHING):
    """
    An attrs field whose default is C{parse(default_text)}, or C{default} if given.

    Parsing the default text keeps the documented default and the real one
    from drifting apart.
    """
    if default is attr.NOTHING:
        default = None if default_text is None else parse(default_text)
    return attr.ib(default=default, metadata={_META: _Setting(parse, default_text, help_text)})


# Parsers. Each takes a flag's text or a YAML value and returns the stored
# value, or raises ValueError with a message that does not repeat the name.

def _root_dir_default(config):
    return os.path.join(config.data_dir, "orchlet")


@attr.s(frozen=True, slots=True, kw_only=True)
class Config:
    """
    Every start-up setting of orchd, checked and converted.

    Construct directly in tests (C{Config(data_dir=..., secure_port=0)}); the
    cross-field rules are checked either way. L{load} is the way from flags.
    """

    data_dir = _setting(_string, "./orchd-data", "State directory: store, PKI, orchconfig.")
    bind_address = _setting(_ip_address, "127.0.0.1", "IP address of every listener.")
    secure_port = _setting(_port, "6443", "API server TLS port; 0 picks a free one.")
    orchlet_port = _setting(_port, "10250", "Node agent TLS port; 0 picks a free one.")
    scheduler_port = _setting(_port, "10259", "The scheduler's TLS health port (/healthz, "
                              "/livez, /readyz); 0 serves none.")
    controller_manager_port = _setting(_port, "10257", "The controller manager's TLS health "
                                       "port (/healthz, /livez, /readyz); 0 serves none.")
    storage_backend = _setting(_storage_backend, "leveldb", "Storage backend: leveldb or etcd.")
    etcd_servers = _setting(_etcd_servers, None,
                            "Comma-separated etcd client URLs, with --storage-backend=etcd.",
                            default=())
    etcd_prefix = _setting(_string, "/registry", "Key prefix of every object in the store.")
    etcd_compaction_interval = _setting(_interval, "5m0s", "How often the store forgets change "
                                        "history older than one interval; 0 never.")
    etcd_cafile = _setting(_string, None, "CA bundle etcd's serving certificate must chain to "
                           "(https:// --etcd-servers).")
    etcd_certfile = _setting(_string, None, "Client certificate (PEM) presented to etcd.")
    etcd_keyfile = _setting(_string, None, "Private key of --etcd-certfile.")
    encryption_provider_config = _setting(_string, None, "EncryptionConfiguration file "
                                          "(apiserver.config.orch.io/v1): the resources "
                                          "encrypted at rest, with which providers and keys.")
    service_cluster_ip_range = _setting(_cidr, "10.96.0.0/12",
                                        "CIDR of Service cluster IPs (IPv4 or IPv6).")
    no_orchlet = _setting(parse_bool, "false", "Run no node agent in this process.")
    orchlet_only = _setting(parse_bool, "false", "Run only a node agent, registering with "
                            "the API server in --orchconfig.")
    authorization_mode = _setting(_authorization_modes, DEFAULT_AUTHORIZATION_MODE,
                                  "Ordered comma list of: " + ", ".join(AUTHORIZATION_MODES) + ".")
    authorization_policy_file = _setting(_string, None, "ABAC policy: one JSON Policy object "
                                         "per line (with --authorization-mode ABAC).")
    authorization_webhook_config_file = _setting(_string, None, "Client configuration (the "
                                                 "orchconfig format) of the remote authorizer "
                                                 "(with --authorization-mode Webhook).")
    authorization_webhook_version = _setting(_webhook_version, "v1beta1", "Version of the "
                                             "SubjectAccessReview sent to the webhook: v1 or "
                                             "v1beta1.")
    authorization_webhook_cache_authorized_ttl = _setting(_interval, "5m0s", "How long the "
                                                          "webhook's allow answers are reused.")
    authorization_webhook_cache_unauthorized_ttl = _setting(_interval, "30s", "How long the "
                                                            "webhook's other answers are reused.")
    enable_bootstrap_token_auth = _setting(parse_bool, "false",
                                           "Accept bootstrap tokens as bearer tokens.")
    enable_metrics = _setting(parse_bool, "true", "Count the API server's requests and storage "
                              "calls and serve /metrics on the API server and the component "
                              "ports; false only to measure what counting costs.")
    client_ca_file = _setting(_string, None, "CA bundle for client certificates, instead of "
                              "the generated CA (its key, if any, next to it as .key).")
    anonymous_auth = _setting(parse_bool, "true", "Treat unauthenticated requests as "
                              "system:anonymous instead of rejecting them.")
    authentication_token_webhook = _setting(parse_bool, "false", "Check unknown bearer tokens "
                                            "with a TokenReview webhook.")
    orchlet_anonymous_auth = _setting(parse_bool, None, "Node agent: treat unauthenticated "
                                      "requests as system:anonymous; unset means "
                                      "--anonymous-auth (so --anonymous-auth=false turns "
                                      "anonymous access off on both).")
    orchlet_authentication_token_webhook = _setting(parse_bool, None, "Node agent: check bearer "
                                                    "tokens with a TokenReview; unset means "
                                                    "--authentication-token-webhook with "
                                                    "--orchlet-only, else false.")
    orchlet_authorization_mode = _setting(_orchlet_authorization_mode, None, "Node agent: "
                                          "AlwaysAllow or Webhook (SubjectAccessReview); unset "
                                          "means --authorization-mode with --orchlet-only if "
                                          "given, else AlwaysAllow.")
    orchconfig = _setting(_string, None, "Client configuration naming the API server "
                          "(for --orchlet-only).")
    bootstrap_token = _setting(_bootstrap_token, None, "Node agent: join with this bootstrap "
                               "token (with --orchlet-only and --server) unless the root "
                               "directory holds credentials of an earlier join.")
    server = _setting(_https_url, None, "API server URL a joining node agent reads cluster-info "
                      "from (with --bootstrap-token).")
    service_account_key_file = _setting(_string, None, "PEM public key(s) that also verify "
                                        "service-account tokens (the signing key always does).")
    service_account_private_key_file = _setting(_string, None, "PEM private key that signs "
                                                "service-account tokens, instead of the "
                                                "generated one.")
    service_account_issuer = _setting(_string, "https://orch.default.svc.cluster.local",
                                      "Issuer (iss) of the service-account tokens this server "
                                      "signs and accepts.")
    api_audiences = _setting(_items, "", "Audiences bound service-account tokens must name "
                             "to be accepted; empty means the issuer.")
    tls_cert_file = _setting(_string, None, "Serving certificate (PEM, chain allowed), instead of "
                             "the generated one.")
    tls_private_key_file = _setting(_string, None, "Private key of --tls-cert-file.")
    runtime_config = _setting(_runtime_config, "", "Comma list of <key>[=true|false] enabling or "
                              "disabling APIs: api/all, api/ga, api/beta, api/alpha, "
                              "<group>/<version>, <group>/<version>/<resource>.")
    feature_gates = _setting(_feature_gates, "", "Comma list of Name=true|false: "
                             + describe_gates() + ".")
    controllers = _setting(_controllers, "*", "Controllers to run: '*' is the default set, "
                           "'name' adds one, '-name' removes one.")
    leader_elect = _setting(parse_bool, "true", "Run the controllers only while holding the "
                            "Lease orch-system/orch-controller-manager, so that one of several "
                            "API servers on one store runs them.")
    leader_elect_lease_duration = _setting(_interval, "12s", "How long a candidate waits after "
                                           "the last renewal it saw before taking the Lease.")
    leader_elect_renew_deadline = _setting(_interval, "8s", "How long the leader tries to renew "
                                           "before it stops its controllers.")
    leader_elect_retry_period = _setting(_interval, "2s", "Time between attempts to take or "
                                         "renew the Lease.")
    livez_grace_period = _setting(_interval, "0s", "Time after start during which /livez "
                                  "does not fail.")
    shutdown_delay_duration = _setting(_interval, "0s", "Time to keep serving after a shutdown "
                                       "signal, with /readyz failing.")
    root_dir = _setting(_string, "<data-dir>/orchlet", "Node agent root directory.",
                        default=attr.Factory(_root_dir_default, takes_self=True))
    hostname_override = _setting(_node_name, None, "Node name instead of the host name.")
    node_monitor_grace_period = _setting(_interval, "40s", "Time without heartbeat before a "
                                         "node is marked unhealthy.")
    pod_eviction_timeout = _setting(_interval, "5m0s", "Grace period for deleting pods "
                                    "on failed nodes.")
    horizontal_pod_autoscaler_sync_period = _setting(_interval, "15s", "Time between two "
                                                     "reconciliations of each "
                                                     "HorizontalPodAutoscaler.")
    simulated_nodes = _setting(_simulated_nodes, "0", "Run this many simulated nodes in this "
                               "process besides the local one, named <node name>-sim-<i>, "
                               "each with its own Node, Lease and identity. With "
                               "--orchlet-only and --orchconfig (an administrator's), only "
                               "they run, in a process of their own.")
    simulated_node_capacity = _setting(_resource_list, "cpu=32,memory=256Gi,pods=110",
                                       "Capacity (and allocatable) of each simulated node: "
                                       "comma list of <resource>=<quantity>.")
    orchlet_client_certificate = _setting(_string, None, "Client certificate the API server "
                                          "presents to node agents.")
    orchlet_client_key = _setting(_string, None, "Key of --orchlet-client-certificate.")
    max_requests_inflight = _setting(_non_negative, "400", "Most non-mutating requests "
                                     "served at once; 0 is no limit.")
    max_mutating_requests_inflight = _setting(_non_negative, "200", "Most mutating requests "
                                              "served at once; 0 is no limit.")
    min_request_timeout = _setting(_non_negative, "1800", "Shortest timeout, in seconds, "
                                   "of long-running requests such as watches.")
    audit_policy_file = _setting(_string, None, "Audit Policy (audit.orch.io/v1 or "
                                 "audit.k8s.io/v1): which requests are recorded, at which "
                                 "level; nothing is audited without it.")
    audit_log_path = _setting(_string, None, "File the audit events are written to, one per "
                              "line; '-' means standard output.")
    audit_log_maxage = _setting(_non_negative, "0", "Days to keep rotated audit log files, by "
                                "the timestamp in their names; 0 keeps them.")
    audit_log_maxbackup = _setting(_non_negative, "0", "Most rotated audit log files kept; 0 "
                                   "keeps all.")
    audit_log_maxsize = _setting(_non_negative, "0", "Megabytes of an audit log file before "
                                 "it is rotated; 0 never rotates.")
    audit_log_compress = _setting(parse_bool, "false", "Gzip rotated audit log files.")
    audit_log_format = _setting(_audit_log_format, "json", "Audit log format: json (one Event "
                                "object per line) or legacy (one line of text per event).")
    audit_log_batch_buffer_size = _setting(_non_negative, "10000", "Audit events waiting for "
                                           "the log writer; past it new ones are dropped "
                                           "and counted.")
    audit_webhook_config_file = _setting(_string, None, "Client configuration (the orchconfig "
                                         "format) of the service audit events are POSTed to "
                                         "as EventLists.")
    audit_webhook_batch_buffer_size = _setting(_non_negative, "10000", "Audit events waiting "
                                               "for the webhook; past it new ones are "
                                               "dropped and counted.")
    audit_webhook_batch_max_size = _setting(_non_negative, "400", "Most audit events in one "
                                            "webhook request.")
    audit_webhook_batch_max_wait = _setting(_interval, "30s", "Longest an audit event waits "
                                            "before a webhook request that is not full is "
                                            "sent.")
    audit_webhook_initial_backoff = _setting(_interval, "10s", "Wait before the first retry "
                                             "of a failed webhook request (then 1.5 times "
                                             "longer, five tries in all).")
    log_format = _setting(_log_format, "text", "Format of the process's log: text, or json "
                          "(one object per line, for every log event).")
    upstream_group_names = _setting(parse_bool, "false", "Also name the renamed API groups "
                                    "in their upstream spelling (apiextensions.k8s.io, "
                                    "rbac.authorization.k8s.io, ...) in discovery, OpenAPI "
                                    "and AdmissionReview, for unmodified manifests, charts "
                                    "and operator frameworks.")
    config = _setting(_string, None, "YAML file with these settings (keys as the flags, "
                      "without --); flags win.")

    def __attrs_post_init__(self):
        _check_combinations(self)

    @property
    def audiences(self):
        """The API audiences: C{--api-audiences}, else the issuer alone."""
        return self.api_audiences or (self.service_account_issuer,)

    @property
    def node_name(self):
        """The node agent's Node name: C{--hostname-override}, else the host name, lowered."""
        return self.hostname_override or socket.gethostname().strip().lower()

    @classmethod
    def load(cls, options):
        """
        Build from parsed C{usage.Options} (a dict of flag name to text or None).

        @raise ConfigError: for any invalid value or combination.
        """
        return load_config(dict(options), options.get("config"))


def _fields():
    for field in attr.fields(Config):
        setting = field.metadata[_META]
        setting.attribute = field.name
        setting.flag = field.name.replace("_", "-")
        yield setting


#: Every setting, in declaration order.
SETTINGS = tuple(_fields())
SETTINGS_BY_FLAG = {setting.flag: setting for setting in SETTINGS}
#: Settings written C{--flag} alone for true, or C{--flag=false}.
BOOLEAN_FLAGS = frozenset(setting.flag for setting in SETTINGS if setting.parse is parse_bool)

_PAIRS = (
    ("tls_cert_file", "tls_private_key_file"),
    ("orchlet_client_certificate", "orchlet_client_key"),
    ("etcd_certfile", "etcd_keyfile"),
)
#: Authorization modes that need a file, and the setting naming it.
_MODE_FILES = (("ABAC", "authorization_policy_file"),
               ("Webhook", "authorization_webhook_config_file"))
_INPUT_FILES = ("authorization_policy_file", "authorization_webhook_config_file",
                "client_ca_file", "service_account_key_file", "service_account_private_key_file",
                "tls_cert_file", "tls_private_key_file", "orchlet_client_certificate",
                "orchlet_client_key", "etcd_cafile", "etcd_certfile", "etcd_keyfile",
                "encryption_provider_config", "audit_policy_file", "audit_webhook_config_file")


def _flag(attribute):
    return "--" + attribute.replace("_", "-")


def _check_combinations(config):
    """Rules between settings; C{ConfigError} names the flags involved."""
    if config.no_orchlet and config.orchlet_only:
        raise ConfigError("--no-orchlet and --orchlet-only exclude each other")
    if config.simulated_nodes and config.orchlet_only and config.orchconfig is None:
        raise ConfigError("--simulated-nodes with --orchlet-only needs --orchconfig: the "
                          "credentials the nodes' certificates are asked for with")
    if (config.bootstrap_token is None) != (config.server is None):
        raise ConfigError("--bootstrap-token and --server must be given together")
    if config.bootstrap_token is not None and not config.orchlet_only:
        raise ConfigError("--bootstrap-token is only used with --orchlet-only")
    if config.audit_webhook_batch_max_size < 1:
        raise ConfigError("--audit-webhook-batch-max-size must be at least 1")
    if config.storage_backend == "etcd" and not config.etcd_servers:
        raise ConfigError("--storage-backend=etcd needs --etcd-servers")
    if config.leader_elect and not (config.leader_elect_lease_duration
                                    > config.leader_elect_renew_deadline
                                    > config.leader_elect_retry_period > 0):
        raise ConfigError("--leader-elect needs --leader-elect-lease-duration > "
                          "--leader-elect-renew-deadline > --leader-elect-retry-period > 0")
    for first, second in _PAIRS:
        if (getattr(config, first) is None) != (getattr(config, second) is None):
            raise ConfigError(f"{_flag(first)} and {_flag(second)} must be given together")
    for mode, attribute in _MODE_FILES:
        given = getattr(config, attribute) is not None
        # With --orchlet-only, --authorization-mode is the node agent's (no file needed).
        if mode in config.authorization_mode and not given and not config.orchlet_only:
            raise ConfigError(f"--authorization-mode={mode} needs {_flag(attribute)}")
        if given and mode not in config.authorization_mode:
            raise ConfigError(f"{_flag(attribute)} is only used with --authorization-mode={mode}")
    for attribute in _INPUT_FILES:
        path = getattr(config, attribute)
        if path is not None and not os.path.isfile(path):
            raise ConfigError(f"{_flag(attribute)}: no such file: {path}")
    if config.audit_policy_file is not None:
        try:
            Policy.load(config.audit_policy_file)
        except AuditPolicyError as e:
            raise ConfigError(f"--audit-policy-file: {e}") from None


def read_config_file(path):
    """
    The settings of a YAML file as C{{flag name: raw value}}, nulls dropped.

    @raise ConfigError: if the file cannot be read, is not YAML, is not a
        mapping or names an unknown setting.
    """
    try:
        document = yamldecode.load_file(path)
    except OSError as error:
        raise ConfigError(f"--config: cannot read {path}: {error.strerror}") from None
    except yamldecode.YAMLDecodeError as error:
        raise ConfigError(f"--config: invalid YAML in {path}: {error}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(f"--config: {path} must hold a mapping of settings")
    values = {}
    for key, value in document.items():
        if key not in SETTINGS_BY_FLAG or key == "config":
            raise ConfigError(f"--config: unknown setting {key!r} in {path}")
        if value is not None:
            values[key] = value
    return values


def load_config(flags, yaml_path=None):
    """
    Build a L{Config}: C{flags} over the file at C{yaml_path} over the defaults.

    @param flags: C{{flag name: text}}; C{None} means "not given", and keys
        that are not settings are ignored (C{usage.Options} carries a few).
    @param yaml_path: a C{--config} file, or C{None}.
    @raise ConfigError: naming the flag or file entry of the first bad value.
    """
    from_file = read_config_file(yaml_path) if yaml_path else {}
    values = {}
    for setting in SETTINGS:
        if flags.get(setting.flag) is not None:
            raw, where = flags[setting.flag], f"--{setting.flag}"
        elif setting.flag in from_file:
            raw, where = from_file[setting.flag], f"{setting.flag} in {yaml_path}"
        else:
            continue
        try:
            values[setting.attribute] = setting.parse(raw)
        except ValueError as error:
            message = " ".join(str(error).split())
            raise ConfigError(f"{where}: {message}") from None
    if yaml_path:
        values["config"] = yaml_path
    return Config(**values)
