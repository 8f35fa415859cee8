"""Encryption providers at rest: upstream's stored layouts, rotation and failures."""

import os

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from nacl.secret import SecretBox
from twisted.trial.unittest import SynchronousTestCase

from orchd.storage import transformers
from orchd.storage.transformers import (
    AESCBCTransformer, AESGCMTransformer, PrefixTransformers, Provider, SecretboxTransformer,
    TransformError, identity_provider,
)

KEY = "/registry/secrets/default/db"
PLAIN = b'{"kind":"Secret","data":{"password":"aHVudGVyMg=="}}'
SECRET_A = bytes(range(32))
SECRET_B = bytes(range(100, 132))


def chain(*providers):
    return PrefixTransformers(providers)


def aesgcm(name="k1", secret=SECRET_A):
    return Provider("aesgcm", [(name, AESGCMTransformer(secret))])


def aescbc(name="k1", secret=SECRET_A):
    return Provider("aescbc", [(name, AESCBCTransformer(secret))])


def secretbox(name="k1", secret=SECRET_A):
    return Provider("secretbox", [(name, SecretboxTransformer(secret))])


class LayoutTests(SynchronousTestCase):
    """Each provider stores upstream's prefix and layout, checked with an independent decrypt."""

    def test_aesgcm_layout(self):
        """aesgcm: prefix, 12-byte nonce, then GCM ciphertext and tag over the key as AAD."""
        stored = chain(aesgcm()).to_storage(PLAIN, KEY)
        prefix = b"k8s:enc:aesgcm:v1:k1:"
        self.assertTrue(stored.startswith(prefix))
        body = stored[len(prefix):]
        self.assertEqual(len(body), 12 + len(PLAIN) + 16)
        self.assertNotIn(b"aHVudGVyMg", stored)
        self.assertEqual(AESGCM(SECRET_A).decrypt(body[:12], body[12:], KEY.encode()), PLAIN)

    def test_aescbc_layout(self):
        """aescbc: prefix, 16-byte IV, then the CBC ciphertext of the PKCS#7-padded value."""
        stored = chain(aescbc()).to_storage(PLAIN, KEY)
        prefix = b"k8s:enc:aescbc:v1:k1:"
        body = stored[len(prefix):]
        self.assertTrue(stored.startswith(prefix))
        padding = 16 - len(PLAIN) % 16
        self.assertEqual(len(body), 16 + len(PLAIN) + padding)
        decryptor = Cipher(algorithms.AES(SECRET_A), modes.CBC(body[:16])).decryptor()
        padded = decryptor.update(body[16:]) + decryptor.finalize()
        self.assertEqual(padded, PLAIN + bytes([padding]) * padding)

    def test_aescbc_full_padding_block(self):
        """A value of a whole number of blocks gets a whole block of padding, and reads back."""
        value = b"x" * 32
        stored = chain(aescbc()).to_storage(value, KEY)
        self.assertEqual(len(stored), len(b"k8s:enc:aescbc:v1:k1:") + 16 + 48)
        self.assertEqual(chain(aescbc()).from_storage(stored, KEY), (value, False))

    def test_secretbox_layout(self):
        """secretbox: prefix, 24-byte nonce, then NaCl's secretbox of the value."""
        stored = chain(secretbox()).to_storage(PLAIN, KEY)
        prefix = b"k8s:enc:secretbox:v1:k1:"
        body = stored[len(prefix):]
        self.assertEqual(len(body), 24 + 16 + len(PLAIN))
        self.assertEqual(SecretBox(SECRET_A).decrypt(body[24:], body[:24]), PLAIN)

    def test_round_trips(self):
        """Every provider reads back what it wrote, empty values included, not stale."""
        for provider in (aesgcm(), aescbc(), secretbox(), identity_provider()):
            for value in (PLAIN, b"", os.urandom(5000)):
                transformer = chain(provider)
                stored = transformer.to_storage(value, KEY)
                self.assertEqual(transformer.from_storage(stored, KEY), (value, False),
                                 provider.name)

    def test_nonces_are_fresh(self):
        """Two writes of one value give different ciphertexts."""
        for provider in (aesgcm(), aescbc(), secretbox()):
            transformer = chain(provider)
            self.assertNotEqual(transformer.to_storage(PLAIN, KEY),
                                transformer.to_storage(PLAIN, KEY))

    def test_identity_writes_as_is(self):
        """identity stores the value itself, without prefix."""
        self.assertEqual(chain(identity_provider()).to_storage(PLAIN, KEY), PLAIN)


class RotationTests(SynchronousTestCase):
    """The first provider and key write; all of them read, and older ones mark the value stale."""

    def test_old_key_second_reads_stale(self):
        """A value written with key k1 reads after k2 is put first, and is stale."""
        old = chain(aesgcm("k1", SECRET_A)).to_storage(PLAIN, KEY)
        rotated = chain(aesgcm("k2", SECRET_B), aesgcm("k1", SECRET_A))
        self.assertEqual(rotated.from_storage(old, KEY), (PLAIN, True))
        new = rotated.to_storage(PLAIN, KEY)
        self.assertTrue(new.startswith(b"k8s:enc:aesgcm:v1:k2:"))
        self.assertEqual(rotated.from_storage(new, KEY), (PLAIN, False))

    def test_keys_of_one_provider(self):
        """Two keys in one provider: the first writes, the second still reads (stale)."""
        provider = Provider("aescbc", [("new", AESCBCTransformer(SECRET_B)),
                                       ("old", AESCBCTransformer(SECRET_A))])
        old = chain(aescbc("old", SECRET_A)).to_storage(PLAIN, KEY)
        self.assertEqual(chain(provider).from_storage(old, KEY), (PLAIN, True))
        self.assertTrue(chain(provider).to_storage(PLAIN, KEY).startswith(
            b"k8s:enc:aescbc:v1:new:"))

    def test_provider_change(self):
        """Moving from secretbox to aesgcm: secretbox values still read, stale."""
        old = chain(secretbox()).to_storage(PLAIN, KEY)
        self.assertEqual(chain(aesgcm("k9"), secretbox()).from_storage(old, KEY), (PLAIN, True))

    def test_same_name_in_two_providers_of_one_kind(self):
        """A failed decrypt under one provider's key does not stop the search."""
        # AES-CBC is unauthenticated: under the wrong key about one value in
        # 256 unpads cleanly into garbage. The value here is one the wrong
        # key refuses, so that the search has a failure to go on from.
        wrong, prefix = AESCBCTransformer(SECRET_B), b"k8s:enc:aescbc:v1:k:"
        while True:
            old = chain(aescbc("k", SECRET_A)).to_storage(PLAIN, KEY)
            try:
                wrong.from_storage(old[len(prefix):], KEY)
            except TransformError:
                break
        both = chain(aescbc("k", SECRET_B), aescbc("k", SECRET_A))
        self.assertEqual(both.from_storage(old, KEY), (PLAIN, True))


class IdentityTests(SynchronousTestCase):
    """Plaintext reads only through identity, and identity never reads ciphertext."""

    def test_plaintext_with_identity_listed(self):
        """With identity after aesgcm, an old plaintext value reads, stale."""
        self.assertEqual(chain(aesgcm(), identity_provider()).from_storage(PLAIN, KEY),
                         (PLAIN, True))

    def test_plaintext_without_identity_refused(self):
        """Without identity among the providers, a plaintext value is an error."""
        with self.assertRaises(TransformError) as caught:
            chain(aesgcm()).from_storage(PLAIN, KEY)
        self.assertIn("no matching prefix found", str(caught.exception))

    def test_identity_first_reads_ciphertext_through_later_provider(self):
        """identity first (moving off encryption) writes plaintext but still decrypts."""
        encrypted = chain(aesgcm()).to_storage(PLAIN, KEY)
        transformer = chain(identity_provider(), aesgcm())
        self.assertEqual(transformer.from_storage(encrypted, KEY), (PLAIN, True))
        self.assertEqual(transformer.to_storage(PLAIN, KEY), PLAIN)

    def test_identity_alone_refuses_ciphertext(self):
        """identity alone does not hand an encrypted value on as plaintext."""
        encrypted = chain(aesgcm()).to_storage(PLAIN, KEY)
        with self.assertRaises(TransformError) as caught:
            chain(identity_provider()).from_storage(encrypted, KEY)
        self.assertIn("'aesgcm', which is not among the providers", str(caught.exception))


class FailureTests(SynchronousTestCase):
    """Wrong keys and damaged values are errors, never wrong plaintext."""

    def assertRefused(self, transformer, stored, says, key=KEY):
        with self.assertRaises(TransformError) as caught:
            transformer.from_storage(stored, key)
        self.assertIn(says, str(caught.exception))

    def test_wrong_key(self):
        """A key of the same name but another secret fails to authenticate."""
        stored = chain(aesgcm("k1", SECRET_A)).to_storage(PLAIN, KEY)
        self.assertRefused(chain(aesgcm("k1", SECRET_B)), stored,
                           "cipher: message authentication failed")
        stored = chain(secretbox("k1", SECRET_A)).to_storage(PLAIN, KEY)
        self.assertRefused(chain(secretbox("k1", SECRET_B)), stored,
                           "secretbox: message authentication failed")

    def test_unknown_key_name(self):
        """A value under a key name no longer configured says which name it carries."""
        stored = chain(aesgcm("gone")).to_storage(PLAIN, KEY)
        self.assertRefused(chain(aesgcm("k2")), stored,
                           "no matching key was found for the provided aesgcm transformer "
                           "(the value names key 'gone')")

    def test_tampered_aesgcm(self):
        """One flipped bit anywhere in an aesgcm value's nonce or body fails."""
        stored = bytearray(chain(aesgcm()).to_storage(PLAIN, KEY))
        for position in (len(b"k8s:enc:aesgcm:v1:k1:"), len(stored) // 2, len(stored) - 1):
            damaged = bytearray(stored)
            damaged[position] ^= 1
            self.assertRefused(chain(aesgcm()), bytes(damaged), "authentication failed")

    def test_aesgcm_value_moved_to_another_key(self):
        """An aesgcm value copied under another storage key fails (the key is authenticated)."""
        stored = chain(aesgcm()).to_storage(PLAIN, KEY)
        self.assertRefused(chain(aesgcm()), stored, "authentication failed",
                           key="/registry/secrets/default/other")

    def test_tampered_secretbox(self):
        """A flipped bit in a secretbox value fails."""
        stored = bytearray(chain(secretbox()).to_storage(PLAIN, KEY))
        stored[-1] ^= 1
        self.assertRefused(chain(secretbox()), bytes(stored), "authentication failed")

    def test_tampered_aescbc(self):
        """aescbc cannot detect every change; a broken padding or length still fails."""
        self.patch(transformers.os, "urandom", lambda n: bytes(n))
        stored = bytearray(chain(aescbc()).to_storage(PLAIN, KEY))
        stored[-1] ^= 0x55
        self.assertRefused(chain(aescbc()), bytes(stored), "PKCS7")
        self.assertRefused(chain(aescbc()), bytes(stored[:-3]), "not a multiple of the block size")

    def test_short_values(self):
        """Values too short for a nonce are refused with upstream's message."""
        for provider in (aesgcm(), aescbc(), secretbox()):
            self.assertRefused(chain(provider), provider.prefix + b"k1:abc",
                               "shorter than the required size")
