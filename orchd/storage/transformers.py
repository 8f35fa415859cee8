# -*- test-case-name: tests.storage.test_transformers -*-
"""
Value transformers: how a stored value is encrypted at rest, as upstream does it.

[COMPAT] The stored form is upstream's
(C{staging/src/k8s.io/apiserver/pkg/storage/value}), so a store written by
one can be read by the other given the same keys::

    k8s:enc:<provider>:v1:<key name>:<ciphertext>

with the ciphertext of each provider laid out as upstream's:

- C{aesgcm}: a 12-byte random nonce, then the GCM ciphertext and its
  16-byte tag; the storage key (C{/registry/secrets/default/a}) is the
  additional authenticated data, so a value copied to another key does not
  decrypt.
- C{aescbc}: a 16-byte random IV, then the CBC ciphertext of the value
  padded with PKCS#7. Nothing is authenticated (upstream's choice; aesgcm
  or secretbox should be preferred).
- C{secretbox}: a 24-byte random nonce, then NaCl's secretbox
  (XSalsa20-Poly1305) of the value; the key is not part of what it
  authenticates.
- C{identity}: the value as it is, no prefix.

A L{PrefixTransformers} chain holds one resource rule's providers: the
first one writes, and a value is read by whichever provider and key its
prefix names, so keys can be rotated. Every call is a few microseconds of
work for a value of a few KB, fine on the reactor thread.
"""

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from zope.interface import Attribute, Interface, implementer

#: What every encrypted value starts with.
ENCRYPTED_PREFIX = b"k8s:enc:"
_GCM_NONCE = 12
_CBC_BLOCK = 16
_SECRETBOX_NONCE = 24
_SECRETBOX_OVERHEAD = 16


class TransformError(Exception):
    """A value cannot be transformed; the message says why, never with key material."""


class IValueTransformer(Interface):
    """One way of storing a value: encryption with one key, or none."""

    def to_storage(data, key):
        """
        @param data: the plaintext C{bytes}.
        @param key: the storage key (C{str}), for providers that authenticate it.
        @return: the stored C{bytes}, without the provider's prefix.
        """

    def from_storage(data, key):
        """
        @param data: the stored bytes after the provider's prefix.
        @return: the plaintext C{bytes}.
        @raise TransformError: the value does not decrypt with this key.
        """


class IProvider(Interface):
    """A provider of an EncryptionConfiguration: its prefix and its named keys."""

    name = Attribute("C{aesgcm}, C{aescbc}, C{secretbox} or C{identity}.")
    prefix = Attribute("C{k8s:enc:<name>:v1:}, or C{b''} for identity.")
    keys = Attribute("C{[(key name, IValueTransformer)]}, the writing key first.")


@implementer(IValueTransformer)
class AESGCMTransformer:
    """AES-GCM with a random 96-bit nonce and the storage key as additional data."""

    def __init__(self, secret):
        self._aead = AESGCM(secret)

    def to_storage(self, data, key):
        nonce = os.urandom(_GCM_NONCE)
        return nonce + self._aead.encrypt(nonce, data, key.encode())

    def from_storage(self, data, key):
        if len(data) < _GCM_NONCE:
            raise TransformError("the stored data was shorter than the required size")
        try:
            return self._aead.decrypt(data[:_GCM_NONCE], data[_GCM_NONCE:], key.encode())
        except InvalidTag:
            raise TransformError("cipher: message authentication failed") from None


@implementer(IValueTransformer)
class AESCBCTransformer:
    """AES-CBC with a random IV and PKCS#7 padding (unauthenticated, as upstream's)."""

    def __init__(self, secret):
        self._algorithm = algorithms.AES(secret)

    def to_storage(self, data, key):
        iv = os.urandom(_CBC_BLOCK)
        padding = _CBC_BLOCK - len(data) % _CBC_BLOCK
        encryptor = Cipher(self._algorithm, modes.CBC(iv)).encryptor()
        return iv + encryptor.update(data + bytes((padding,)) * padding) + encryptor.finalize()

    def from_storage(self, data, key):
        if len(data) < _CBC_BLOCK:
            raise TransformError("the stored data was shorter than the required size")
        body = data[_CBC_BLOCK:]
        if len(body) % _CBC_BLOCK:
            raise TransformError("the stored data is not a multiple of the block size")
        decryptor = Cipher(self._algorithm, modes.CBC(data[:_CBC_BLOCK])).decryptor()
        result = decryptor.update(body) + decryptor.finalize()
        padding = result[-1] if result else 0
        if padding == 0 or padding > len(result):
            raise TransformError("invalid PKCS7 data (empty or not padded)")
        if result[-padding:] != bytes((padding,)) * padding:
            raise TransformError("invalid padding on input")
        return result[:-padding]


@implementer(IValueTransformer)
class SecretboxTransformer:
    """NaCl secretbox (XSalsa20-Poly1305) with a random 24-byte nonce in front."""

    def __init__(self, secret):
        # Imported here: only a configuration that names secretbox needs PyNaCl.
        from nacl.exceptions import CryptoError
        from nacl.secret import SecretBox

        self._box = SecretBox(secret)
        self._error = CryptoError

    def to_storage(self, data, key):
        # EncryptedMessage is the nonce followed by the box: upstream's layout.
        return bytes(self._box.encrypt(data, os.urandom(_SECRETBOX_NONCE)))

    def from_storage(self, data, key):
        if len(data) < _SECRETBOX_NONCE + _SECRETBOX_OVERHEAD:
            raise TransformError("the stored data was shorter than the required size")
        try:
            return self._box.decrypt(data)
        except self._error:
            raise TransformError("secretbox: message authentication failed") from None


@implementer(IValueTransformer)
class IdentityTransformer:
    """
    Values as they are; refuses to read an encrypted value as plaintext
    (upstream's encrypt-check identity), so ciphertext never reaches a decoder.
    """

    def to_storage(self, data, key):
        return data

    def from_storage(self, data, key):
        if data.startswith(ENCRYPTED_PREFIX):
            raise TransformError("identity transformer tried to read encrypted data")
        return data


@implementer(IProvider)
class Provider:
    """
    A configured provider.

    @param name: C{aesgcm}, C{aescbc}, C{secretbox} or C{identity}.
    @param keys: C{[(key name, IValueTransformer)]}; identity has one, unnamed.
    """

    def __init__(self, name, keys):
        self.name = name
        self.prefix = b"" if name == "identity" else b"k8s:enc:%s:v1:" % name.encode()
        self.keys = list(keys)


def identity_provider():
    return Provider("identity", [("", IdentityTransformer())])


class PrefixTransformers:
    """
    One resource rule's providers in order: the first provider's first key
    writes; reading tries every provider and key whose prefix the value
    carries, so a value written with a key now further down still reads.

    A value read with anything but the writing key is I{stale}: an update
    must rewrite it even when the object is unchanged, which is how
    rewriting every object moves it to the current key.

    @param providers: L{IProvider}s, in configuration order.
    """

    def __init__(self, providers):
        self.providers = list(providers)
        entries = []
        for provider in self.providers:
            for name, transformer in provider.keys:
                prefix = provider.prefix + (name.encode() + b":" if provider.prefix else b"")
                entries.append((prefix, transformer))
        self._entries = entries
        self._write_prefix, self._writer = entries[0]
        self._writes_plaintext = not self._write_prefix

    @property
    def writes_plaintext(self):
        """True when the first provider is identity."""
        return self._writes_plaintext

    def to_storage(self, data, key):
        """The stored form of C{data} at C{key}: the writing prefix and ciphertext."""
        if self._writes_plaintext:
            return data
        return self._write_prefix + self._writer.to_storage(data, key)

    def from_storage(self, data, key):
        """
        @return: C{(plaintext, stale)}.
        @raise TransformError: no provider or key reads C{data}.
        """
        errors = []
        for index, (prefix, transformer) in enumerate(self._entries):
            if not data.startswith(prefix):
                continue
            try:
                plain = transformer.from_storage(data[len(prefix):] if prefix else data, key)
            except TransformError as error:
                if prefix:
                    # The same provider may appear twice (rotating between two
                    # aescbc keys): a failed match does not end the search.
                    errors.append(str(error))
                continue
            return plain, index != 0
        if errors:
            raise TransformError(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
        raise TransformError(self._no_match(data))

    def _no_match(self, data):
        if not data.startswith(ENCRYPTED_PREFIX):
            return ("no matching prefix found (the value is not encrypted, and identity is "
                    "not among the providers)")
        provider, _, rest = data[len(ENCRYPTED_PREFIX):].partition(b":")
        provider = provider[:32].decode("ascii", "replace")
        names = [p.name for p in self.providers]
        if provider not in names:
            return f"no matching prefix found (the value is encrypted with {provider!r}, " \
                   f"which is not among the providers {names})"
        _, _, rest = rest.partition(b":")
        key_name = rest.partition(b":")[0][:64].decode("utf-8", "replace")
        return (f"no matching key was found for the provided {provider} transformer "
                f"(the value names key {key_name!r})")
