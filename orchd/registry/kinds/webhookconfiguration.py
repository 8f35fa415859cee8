# -*- test-case-name: tests.registry.test_webhookconfiguration -*-
"""
ValidatingWebhookConfiguration and MutatingWebhookConfiguration: upstream's
defaults and validation (C{pkg/apis/admissionregistration/validation},
v1 rules).

A configuration that is stored is one the admission plugin can call, so
every field it reads is checked here: names, exactly one of C{url}
(https, no user, fragment or query) or C{service}, a PEM C{caBundle},
rules, C{sideEffects}, C{admissionReviewVersions}, C{timeoutSeconds},
selectors and C{matchConditions} (compiled: one that cannot be evaluated
is refused, never ignored).
"""

import base64
import binascii
from urllib.parse import urlsplit

from cryptography import x509
from zope.interface import implementer

from orchd.admission.webhook.conditions import MAX_CONDITIONS, ConditionError, compile_condition
from orchd.api.errors import FieldError
from orchd.api.meta import dns1035_label_errors, dns1123_subdomain_errors, label_key_errors
from orchd.registry.kinds.workloads import label_selector_errors
from orchd.registry.strategy import DefaultStrategy, IStrategy

OPERATIONS = ("*", "CREATE", "UPDATE", "DELETE", "CONNECT")
SCOPES = ("*", "Cluster", "Namespaced")
FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Equivalent", "Exact")
SIDE_EFFECTS = ("None", "NoneOnDryRun")
REINVOCATION_POLICIES = ("Never", "IfNeeded")
REVIEW_VERSIONS = ("v1", "v1beta1")
DEFAULT_TIMEOUT = 10
DEFAULT_PORT = 443
_URL_FORM = "; desired format: https://host[/path]"


def default_configuration(obj, mutating):
    """Upstream's v1 defaults, in place."""
    webhooks = obj.get("webhooks")
    if not isinstance(webhooks, list):
        return
    for hook in webhooks:
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", DEFAULT_TIMEOUT)
        if mutating:
            hook.setdefault("reinvocationPolicy", "Never")
        for rule in hook.get("rules") or ():
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")
        service = (hook.get("clientConfig") or {}).get("service") \
            if isinstance(hook.get("clientConfig"), dict) else None
        if isinstance(service, dict):
            service.setdefault("port", DEFAULT_PORT)


def configuration_errors(obj, mutating):
    """The L{FieldError}s of a configuration (defaults applied)."""
    webhooks = obj.get("webhooks")
    if webhooks is None:
        return []
    if not isinstance(webhooks, list):
        return [FieldError.type_invalid("webhooks", webhooks, "must be of type array")]
    errors, names = [], set()
    for i, hook in enumerate(webhooks):
        path = f"webhooks[{i}]"
        if not isinstance(hook, dict):
            errors.append(FieldError.type_invalid(path, hook, "must be of type object"))
            continue
        name = hook.get("name")
        if isinstance(name, str) and name in names:
            errors.append(FieldError.duplicate(f"{path}.name", name))
        names.add(name if isinstance(name, str) else None)
        errors += webhook_errors(hook, path, mutating)
    return errors


def webhook_errors(hook, path, mutating):
    """One webhook's errors."""
    errors = _qualified_name_errors(hook.get("name"), f"{path}.name")
    for j, rule in enumerate(_list(hook, "rules", path, errors)):
        errors += rule_errors(rule, f"{path}.rules[{j}]")
    errors += _choice(hook, "failurePolicy", FAILURE_POLICIES, path)
    errors += _choice(hook, "matchPolicy", MATCH_POLICIES, path)
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        errors.append(FieldError.required(f"{path}.sideEffects",
                                          "must specify one of None, NoneOnDryRun"))
    elif side_effects not in SIDE_EFFECTS:
        errors.append(FieldError.not_supported(f"{path}.sideEffects", side_effects, SIDE_EFFECTS))
    if mutating:
        errors += _choice(hook, "reinvocationPolicy", REINVOCATION_POLICIES, path)
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool)
                                or not 1 <= timeout <= 30):
        errors.append(FieldError.invalid(f"{path}.timeoutSeconds", timeout,
                                         "the timeout value must be between 1 and 30 seconds"))
    errors += review_versions_errors(hook.get("admissionReviewVersions"),
                                     f"{path}.admissionReviewVersions")
    for field in ("namespaceSelector", "objectSelector"):
        if hook.get(field) is not None:
            errors += label_selector_errors(hook[field], f"{path}.{field}")
    errors += client_config_errors(hook.get("clientConfig"), f"{path}.clientConfig")
    errors += match_conditions_errors(hook.get("matchConditions"), f"{path}.matchConditions")
    return errors


def _list(hook, field, path, errors):
    value = hook.get(field)
    if value is None:
        return []
    if not isinstance(value, list):
        errors.append(FieldError.type_invalid(f"{path}.{field}", value, "must be of type array"))
        return []
    return value


def _choice(hook, field, supported, path):
    value = hook.get(field)
    if value is not None and value not in supported:
        return [FieldError.not_supported(f"{path}.{field}", value, supported)]
    return []


def _qualified_name_errors(name, path):
    """Upstream's C{IsFullyQualifiedName}."""
    if not isinstance(name, str) or not name:
        return [FieldError.required(path)]
    errors = [FieldError.invalid(path, name, message)
              for message in dns1123_subdomain_errors(name)]
    if not errors and len(name.split(".")) < 3:
        errors.append(FieldError.invalid(
            path, name, "should be a domain with at least three segments separated by dots"))
    return errors


def review_versions_errors(versions, path):
    """C{admissionReviewVersions}: given, each a version, once, one of them known."""
    if not versions:
        return [FieldError.required(path, "must specify one of v1, v1beta1")]
    if not isinstance(versions, list):
        return [FieldError.type_invalid(path, versions, "must be of type array")]
    errors, seen, known = [], set(), False
    for i, version in enumerate(versions):
        if not isinstance(version, str) or dns1035_label_errors(version):
            errors.append(FieldError.invalid(f"{path}[{i}]", version, "must be a valid version"))
            continue
        if version in seen:
            errors.append(FieldError.duplicate(f"{path}[{i}]", version))
        seen.add(version)
        known = known or version in REVIEW_VERSIONS
    if not known:
        errors.append(FieldError.invalid(path, versions,
                                         "must include at least one of v1, v1beta1"))
    return errors


def rule_errors(rule, path):
    """Upstream's C{ValidateRuleWithOperations}."""
    if not isinstance(rule, dict):
        return [FieldError.type_invalid(path, rule, "must be of type object")]
    errors = []
    for field, supported, what in (("operations", OPERATIONS, "operations"),
                                   ("apiGroups", None, "API groups"),
                                   ("apiVersions", None, "API versions")):
        values = rule.get(field)
        where = f"{path}.{field}"
        if not values:
            errors.append(FieldError.required(where))
            continue
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            errors.append(FieldError.type_invalid(where, values, "must be a list of strings"))
            continue
        if len(values) > 1 and "*" in values:
            errors.append(FieldError.invalid(
                where, values, f"if '*' is present, must not specify other {what}"))
        for i, value in enumerate(values):
            if supported is not None and value not in supported:
                errors.append(FieldError.not_supported(f"{where}[{i}]", value, supported))
            elif field == "apiVersions" and not value:
                errors.append(FieldError.required(f"{where}[{i}]"))
    errors += resources_errors(rule.get("resources"), f"{path}.resources")
    scope = rule.get("scope")
    if scope is not None and scope not in SCOPES:
        errors.append(FieldError.not_supported(f"{path}.scope", scope, SCOPES))
    return errors


def resources_errors(resources, path):
    """Upstream's C{validateResources}: C{x}, C{x/y}, C{x/*}, C{*/y}, C{*}, C{*/*}."""
    if not resources:
        return [FieldError.required(path)]
    if not isinstance(resources, list) or not all(isinstance(r, str) for r in resources):
        return [FieldError.type_invalid(path, resources, "must be a list of strings")]
    errors = []
    wildcard_subresources, wildcard_resources = set(), set()
    double, single, plain = False, False, False
    for i, entry in enumerate(resources):
        if not entry:
            errors.append(FieldError.required(f"{path}[{i}]"))
            continue
        double = double or entry == "*/*"
        single = single or entry == "*"
        parts = entry.split("/", 1)
        if len(parts) == 1:
            plain = plain or entry != "*"
            continue
        resource, subresource = parts
        if resource in wildcard_subresources:
            errors.append(FieldError.invalid(
                f"{path}[{i}]", entry, f"if '{resource}/*' is present, must not specify {entry}"))
        if subresource in wildcard_resources:
            errors.append(FieldError.invalid(
                f"{path}[{i}]", entry,
                f"if '*/{subresource}' is present, must not specify {entry}"))
        if subresource == "*":
            wildcard_subresources.add(resource)
        if resource == "*":
            wildcard_resources.add(subresource)
    if len(resources) > 1 and double:
        errors.append(FieldError.invalid(path, resources,
                                         "if '*/*' is present, must not specify other resources"))
    if single and plain:
        errors.append(FieldError.invalid(
            path, resources, "if '*' is present, must not specify other resources without "
            "subresources"))
    return errors


def client_config_errors(config, path):
    """Exactly one of C{url} or C{service}, each valid, and a PEM C{caBundle}."""
    if not isinstance(config, dict):
        return [FieldError.required(path, "exactly one of url or service is required")]
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [FieldError.required(path, "exactly one of url or service is required")]
    errors = []
    if url is not None:
        errors += url_errors(url, f"{path}.url")
    else:
        errors += service_errors(service, f"{path}.service")
    bundle = config.get("caBundle")
    if bundle is not None and ca_bundle_pem(bundle) is None:
        errors.append(FieldError.invalid(f"{path}.caBundle", "<omitted>",
                                         "must be a base64-encoded PEM certificate bundle"))
    return errors


def url_errors(url, path):
    """Upstream's C{ValidateWebhookURL} with https forced."""
    if not isinstance(url, str):
        return [FieldError.type_invalid(path, url, "must be of type string")]
    try:
        parts = urlsplit(url)
        parts.port
    except ValueError as error:
        return [FieldError.required(path, f"url must be a valid URL: {error}{_URL_FORM}")]
    errors = []
    if parts.scheme != "https":
        errors.append(FieldError.invalid(path, parts.scheme,
                                         "'https' is the only allowed URL scheme" + _URL_FORM))
    if not parts.netloc.rpartition("@")[2]:
        errors.append(FieldError.invalid(path, "", "host must be specified" + _URL_FORM))
    if "@" in parts.netloc:
        errors.append(FieldError.invalid(path, parts.netloc.rpartition("@")[0],
                                         "user information is not permitted in the URL"))
    if parts.fragment or url.endswith("#"):
        errors.append(FieldError.invalid(path, parts.fragment,
                                         "fragments are not permitted in the URL"))
    if parts.query or "?" in url:
        errors.append(FieldError.invalid(path, parts.query,
                                         "query parameters are not permitted in the URL"))
    return errors


def service_errors(service, path):
    """Upstream's C{ValidateWebhookService}."""
    if not isinstance(service, dict):
        return [FieldError.type_invalid(path, service, "must be of type object")]
    errors = []
    if not service.get("name"):
        errors.append(FieldError.required(f"{path}.name", "service name is required"))
    elif not isinstance(service["name"], str) or dns1035_label_errors(service["name"]):
        errors.append(FieldError.invalid(f"{path}.name", service["name"],
                                         "must be a valid service name"))
    if not service.get("namespace"):
        errors.append(FieldError.required(f"{path}.namespace", "service namespace is required"))
    elif not isinstance(service["namespace"], str) or dns1035_label_errors(service["namespace"]) \
            and dns1123_subdomain_errors(service["namespace"]):
        errors.append(FieldError.invalid(f"{path}.namespace", service["namespace"],
                                         "must be a valid namespace name"))
    port = service.get("port", DEFAULT_PORT)
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        errors.append(FieldError.invalid(f"{path}.port", port,
                                         "port is not valid: must be between 1 and 65535, "
                                         "inclusive"))
    route = service.get("path")
    if route is not None:
        if not isinstance(route, str) or not route.startswith("/"):
            errors.append(FieldError.invalid(f"{path}.path", route, "must start with a '/'"))
        elif "?" in route or "#" in route:
            errors.append(FieldError.invalid(f"{path}.path", route,
                                             "must not contain a query or a fragment"))
    return errors


def ca_bundle_pem(bundle):
    """The PEM bytes of a C{caBundle} (base64 in JSON), or None if it is not a PEM bundle."""
    if not isinstance(bundle, str):
        return None
    try:
        pem = base64.b64decode(bundle, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not pem:
        return b""
    try:
        x509.load_pem_x509_certificates(pem)
    except ValueError:
        return None
    return pem


def match_conditions_errors(conditions, path):
    """Names (qualified, unique) and expressions (compiled) of C{matchConditions}."""
    if conditions is None:
        return []
    if not isinstance(conditions, list):
        return [FieldError.type_invalid(path, conditions, "must be of type array")]
    if len(conditions) > MAX_CONDITIONS:
        return [FieldError.too_many(path, len(conditions), MAX_CONDITIONS)]
    errors, names = [], set()
    for i, condition in enumerate(conditions):
        where = f"{path}[{i}]"
        if not isinstance(condition, dict):
            errors.append(FieldError.type_invalid(where, condition, "must be of type object"))
            continue
        name = condition.get("name")
        if not isinstance(name, str) or not name:
            errors.append(FieldError.required(f"{where}.name"))
        else:
            errors += [FieldError.invalid(f"{where}.name", name, message)
                       for message in label_key_errors(name)]
            if name in names:
                errors.append(FieldError.duplicate(f"{where}.name", name))
            names.add(name)
        expression = condition.get("expression")
        if not isinstance(expression, str) or not expression.strip():
            errors.append(FieldError.required(f"{where}.expression"))
            continue
        try:
            compile_condition(expression)
        except ConditionError as error:
            errors.append(FieldError.invalid(f"{where}.expression", expression, str(error)))
    return errors


@implementer(IStrategy)
class WebhookConfigurationStrategy(DefaultStrategy):
    """Defaults, then validation, of a validating webhook configuration."""

    mutating = False

    def prepare_for_create(self, ctx, obj):
        default_configuration(obj, self.mutating)

    def prepare_for_update(self, ctx, obj, old):
        default_configuration(obj, self.mutating)

    def validate(self, ctx, obj):
        return configuration_errors(obj, self.mutating)


@implementer(IStrategy)
class MutatingWebhookConfigurationStrategy(WebhookConfigurationStrategy):
    """The same, with C{reinvocationPolicy}."""

    mutating = True
