"""--encryption-provider-config: upstream's EncryptionConfiguration, checked at start."""

import base64
import os

import yaml
from twisted.trial.unittest import SynchronousTestCase

from orchd.app.encryptionconfig import (
    EncryptionConfigError, load_encryption_config, parse_encryption_config,
)
from orchd.storage.transformers import TransformError

KEY16 = base64.b64encode(b"k" * 16).decode()
KEY32 = base64.b64encode(b"K" * 32).decode()
VALUE = b'{"kind":"Secret"}'


def document(*rules, api_version="apiserver.config.orch.io/v1"):
    return {"apiVersion": api_version, "kind": "EncryptionConfiguration",
            "resources": list(rules)}


def rule(resources, *providers):
    return {"resources": list(resources), "providers": list(providers)}


def aes(kind="aesgcm", *keys):
    return {kind: {"keys": [{"name": name, "secret": secret} for name, secret in keys]
                   or [{"name": "k1", "secret": KEY32}]}}


IDENTITY = {"identity": {}}


class ParsingTests(SynchronousTestCase):
    """A valid file gives each storage key the chain of the rule covering its resource."""

    def test_rules_by_resource(self):
        """Exact names win over *.group, which wins over *.*; keys of no resource pass."""
        config = parse_encryption_config(document(
            rule(["secrets"], aes("aesgcm", ("s", KEY32))),
            rule(["*.apps"], aes("aescbc", ("a", KEY32))),
            rule(["*.*"], aes("secretbox", ("all", KEY32)))))

        def prefix_written(key):
            return config.transformer_for(key).to_storage(VALUE, key).split(b":")[2:5]

        self.assertEqual(prefix_written("/registry/secrets/ns/a"), [b"aesgcm", b"v1", b"s"])
        self.assertEqual(prefix_written("/registry/apps/deployments/ns/d"),
                         [b"aescbc", b"v1", b"a"])
        self.assertEqual(prefix_written("/registry/configmaps/ns/c"),
                         [b"secretbox", b"v1", b"all"])
        self.assertEqual(prefix_written("/registry/rbac.authorization.orch.io/roles/ns/r"),
                         [b"secretbox", b"v1", b"all"])
        self.assertIsNone(config.transformer_for("/registry/ranges/serviceips"))
        self.assertIsNone(config.transformer_for("/registry/nothing"))

    def test_custom_resources(self):
        """Custom resources, unknown at start, take the rule naming them, their group's, or *.*."""
        config = parse_encryption_config(document(
            rule(["widgets.example.com"], aes("aesgcm", ("w", KEY32))),
            rule(["*.other.io"], aes("aescbc", ("o", KEY32))),
            rule(["*.*"], aes("secretbox", ("all", KEY32)))))

        def prefix_written(key):
            return config.transformer_for(key).to_storage(VALUE, key).split(b":")[2:5]

        self.assertEqual(prefix_written("/registry/example.com/widgets/ns/w"),
                         [b"aesgcm", b"v1", b"w"])
        self.assertEqual(prefix_written("/registry/other.io/gadgets/g"), [b"aescbc", b"v1", b"o"])
        self.assertEqual(prefix_written("/registry/example.com/gizmos/ns/g"),
                         [b"secretbox", b"v1", b"all"])

    def test_unlisted_resources_stay_plaintext(self):
        """A resource no rule covers is written as it is and refuses encrypted values."""
        config = parse_encryption_config(document(rule(["secrets"], aes())))
        transformer = config.transformer_for("/registry/configmaps/ns/c")
        self.assertEqual(transformer.to_storage(VALUE, "k"), VALUE)
        self.assertTrue(transformer.writes_plaintext)
        with self.assertRaises(TransformError):
            transformer.from_storage(b"k8s:enc:aesgcm:v1:k1:xxxxxxxxxxxxxxxxxxxx", "k")

    def test_group_spellings(self):
        """Groups read with orch.io or upstream's k8s.io; *. is the core group."""
        config = parse_encryption_config(document(
            rule(["leases.coordination.k8s.io", "*."], aes()),
            rule(["*.rbac.authorization.orch.io"], aes("aescbc"))))
        for key in ("/registry/coordination.orch.io/leases/ns/l", "/registry/pods/ns/p",
                    "/registry/secrets/ns/s"):
            self.assertFalse(config.transformer_for(key).writes_plaintext, key)
        self.assertTrue(config.transformer_for(
            "/registry/rbac.authorization.orch.io/roles/ns/r").to_storage(VALUE, "k").startswith(
            b"k8s:enc:aescbc:"))
        self.assertTrue(config.transformer_for(
            "/registry/apps/deployments/ns/d").writes_plaintext)

    def test_upstream_api_version(self):
        """apiserver.config.k8s.io/v1, upstream's spelling, is accepted too, rules and all."""
        config = parse_encryption_config(document(rule(["secrets"], aes()),
                                                  api_version="apiserver.config.k8s.io/v1"))
        self.assertEqual(config.describe(), ["secrets: aesgcm(k1)"])
        self.assertTrue(config.transformer_for("/registry/secrets/ns/s").to_storage(
            VALUE, "/registry/secrets/ns/s").startswith(b"k8s:enc:aesgcm:v1:k1:"))

    def test_key_sizes(self):
        """aesgcm and aescbc take 16, 24 or 32 bytes; secretbox 32."""
        key24 = base64.b64encode(b"x" * 24).decode()
        for kind, secret in (("aesgcm", KEY16), ("aesgcm", key24), ("aescbc", KEY16),
                             ("aescbc", KEY32), ("secretbox", KEY32)):
            config = parse_encryption_config(document(rule(["secrets"], aes(kind, ("k", secret)))))
            transformer = config.transformer_for("/registry/secrets/ns/s")
            stored = transformer.to_storage(VALUE, "/registry/secrets/ns/s")
            self.assertTrue(stored.startswith(f"k8s:enc:{kind}:v1:k:".encode()), kind)
            self.assertEqual(transformer.from_storage(stored, "/registry/secrets/ns/s"),
                             (VALUE, False), kind)

    def test_describe_names_no_secret(self):
        """The start-up summary names resources, providers and key names only."""
        config = parse_encryption_config(document(
            rule(["secrets", "configmaps"], aes("aesgcm", ("new", KEY32), ("old", KEY16)),
                 IDENTITY)))
        self.assertEqual(config.describe(), ["secrets, configmaps: aesgcm(new, old) > identity"])
        self.assertNotIn(KEY32, repr(config.describe()))

    def test_unknown_resource_warns(self):
        """A resource this server does not store is accepted (as upstream) with a warning."""
        config = parse_encryption_config(document(
            rule(["pandas.awesome.bears.example", "secret"], aes())))
        self.assertEqual(len(config.warnings), 2)
        self.assertIn("'secret' is not stored by this server", config.warnings[1])

    def test_file(self):
        """A YAML file on disk loads."""
        path = self.mktemp()
        with open(path, "w") as stream:
            yaml.safe_dump(document(rule(["secrets"], aes(), IDENTITY)), stream)
        config = load_encryption_config(path)
        self.assertFalse(config.transformer_for("/registry/secrets/a/b").writes_plaintext)


class ErrorTests(SynchronousTestCase):
    """An invalid file is refused with one line naming the problem and where it is."""

    def assertRefused(self, doc, *says):
        with self.assertRaises(EncryptionConfigError) as caught:
            parse_encryption_config(doc)
        message = str(caught.exception)
        self.assertNotIn("\n", message)
        for part in says:
            self.assertIn(part, message)
        return message

    def test_unknown_provider(self):
        """A provider name orchd does not know is named."""
        self.assertRefused(document(rule(["secrets"], {"aesgcmm": {"keys": []}})),
                           "resources[0].providers[0]", "unknown provider 'aesgcmm'")

    def test_kms(self):
        """kms is refused as unsupported."""
        self.assertRefused(document(rule(["secrets"], {"kms": {"name": "x"}})),
                           "kms provider is not supported")

    def test_bad_key_length(self):
        """A secret of the wrong size names the key and the sizes the provider takes."""
        message = self.assertRefused(
            document(rule(["secrets"], aes("secretbox", ("short", KEY16)))),
            "resources[0].providers[0].secretbox.keys[0].secret",
            "key 'short' is 16 bytes long; secretbox takes 32")
        self.assertNotIn(KEY16, message)
        self.assertRefused(document(rule(["secrets"], aes("aesgcm", ("k", "YWJj")))),
                           "3 bytes long; aesgcm takes 16 or 24 or 32")

    def test_bad_base64(self):
        """A secret that is not base64 is named, without its value."""
        message = self.assertRefused(
            document(rule(["secrets"], aes("aescbc", ("k", "not base64!!")))),
            "secret of key 'k' must be base64 encoded")
        self.assertNotIn("not base64!!", message)

    def test_duplicate_key_names(self):
        """One key name twice for one provider kind in a rule is refused."""
        self.assertRefused(
            document(rule(["secrets"], aes("aesgcm", ("k", KEY32), ("k", KEY16)))),
            "duplicate key name 'k'")
        self.assertRefused(
            document(rule(["secrets"], aes("aesgcm", ("k", KEY32)), aes("aesgcm", ("k", KEY16)))),
            "resources[0].providers[1].aesgcm.keys[0].name", "duplicate key name 'k'")

    def test_resource_listed_twice(self):
        """A resource in one list twice, or in two rules, is refused."""
        self.assertRefused(document(rule(["secrets", "secrets"], aes())),
                           "'secrets': the same resource cannot be specified multiple times")
        self.assertRefused(document(rule(["secrets"], aes()), rule(["secrets"], IDENTITY)),
                           "resources[1].resources[0]", "already listed at "
                           "resources[0].resources[0]")

    def test_masked_and_overlapping(self):
        """A resource after its group's wildcard, or beside it, is refused as masked."""
        self.assertRefused(document(rule(["*.apps"], aes()),
                                    rule(["deployments.apps"], IDENTITY)),
                           "'deployments.apps' is masked by the earlier rule '*.apps'")
        self.assertRefused(document(rule(["*.*"], aes()), rule(["secrets"], IDENTITY)),
                           "masked by the earlier rule '*.*'")
        self.assertRefused(document(rule(["secrets", "*."], aes())), "overlaps")
        self.assertRefused(document(rule(["*.*", "deployments.apps"], aes())), "overlaps")

    def test_resource_names(self):
        """Upstream's name rules: no capitals, no bare *, no resource.*, no allocations."""
        self.assertRefused(document(rule(["Secrets"], aes())), "capital letters")
        self.assertRefused(document(rule(["*"], aes())), "use '*.'")
        self.assertRefused(document(rule(["secrets.*"], aes())), "across groups")
        self.assertRefused(document(rule(["serviceipallocations"], aes())), "REST")
        self.assertRefused(document(rule([".apps"], aes())), "names no resource")
        self.assertRefused(document(rule([7], aes())), "must be a string")

    def test_structure(self):
        """Missing parts, wrong types, unknown fields and a wrong header are each named."""
        self.assertRefused(document(), "resources", "at least one")
        self.assertRefused(document(rule([], aes())), "resources[0].resources", "at least one")
        self.assertRefused(document(rule(["secrets"])), "providers", "at least one provider")
        self.assertRefused(document(rule(["secrets"], {"aesgcm": {"keys": []},
                                                         "identity": {}})),
                           "more than one provider")
        self.assertRefused(document(rule(["secrets"], {"aesgcm": {"keys": []}})),
                           "at least one key")
        self.assertRefused(document(rule(["secrets"], {"aesgcm": {"keys": [{"secret": KEY32}]}})),
                           "name is a mandatory field")
        self.assertRefused(document(rule(["secrets"], {"aesgcm": {"keys": [{"name": "k"}]}})),
                           "secret is a mandatory field")
        self.assertRefused(document(rule(["secrets"], {"identity": {"x": 1}})), "takes no settings")
        self.assertRefused(dict(document(rule(["secrets"], aes())), extra=1),
                           "unknown field 'extra'")
        self.assertRefused(document(rule(["secrets"], aes()), api_version="v1"),
                           "apiVersion", "apiserver.config.orch.io/v1")
        self.assertRefused(dict(document(rule(["secrets"], aes())), kind="Other"), "kind")
        self.assertRefused(["not", "a", "mapping"], "must be a mapping")

    def test_files(self):
        """A missing, empty or non-YAML file is refused naming the file."""
        missing = os.path.join(self.mktemp(), "none.yaml")
        with self.assertRaises(EncryptionConfigError) as caught:
            load_encryption_config(missing)
        self.assertIn("cannot read", str(caught.exception))
        for content, says in ((b"", "is empty"), (b"a: [1,\n  b: }\n", "not valid YAML"),
                              (b"kind: EncryptionConfiguration\n", "apiVersion")):
            path = self.mktemp()
            with open(path, "wb") as stream:
                stream.write(content)
            with self.assertRaises(EncryptionConfigError) as caught:
                load_encryption_config(path)
            self.assertIn(path, str(caught.exception))
            self.assertIn(says, str(caught.exception))
            self.assertNotIn("\n", str(caught.exception))
