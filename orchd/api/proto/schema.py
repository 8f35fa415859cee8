# -*- test-case-name: tests.api.test_proto -*-
"""
Every message of the API, built once from the definition files.

The files under C{defs/} are parsed (L{orchd.api.proto.parser}), linked in
one descriptor pool of the protobuf package, and turned into message
classes. A kind's message is found by convention: package
C{orch.api.<first label of the group, or core>.<version>}, message named
as the kind (its list as C{<Kind>List}).
"""

import functools
import os

from google.protobuf import descriptor_pool, message_factory

from orchd.api.proto.parser import parse, resolve

DEFS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "defs")

#: Kinds of the meta group, served under any group's version (Status, ...).
META_PACKAGE = "orch.meta.v1"


class Schema:
    """
    The linked messages: classes by full name, and the JSON facts per message.
    """

    def __init__(self, root=DEFS):
        parsed = []
        for directory, _, files in sorted(os.walk(root)):
            for file_name in sorted(files):
                if file_name.endswith(".proto"):
                    path = os.path.join(directory, file_name)
                    relative = os.path.relpath(path, root).replace(os.sep, "/")
                    with open(path, encoding="utf-8") as f:
                        parsed.append(parse(relative, f.read()))
        resolve(parsed)
        self.pool = descriptor_pool.DescriptorPool()
        pending = {p.proto.name: p for p in parsed}
        added = set()

        def add(name):
            if name in added:
                return
            for dependency in pending[name].proto.dependency:
                add(dependency)
            self.pool.Add(pending[name].proto)
            added.add(name)

        for name in pending:
            add(name)
        self.keep = {}
        self.inline = {}
        self.json_names = {}
        for p in parsed:
            self.keep.update(p.keep)
            self.inline.update(p.inline)
            self.json_names.update(p.json_names)
        self.files = [p.proto.name for p in parsed]
        self._kinds = {}

    @functools.lru_cache(maxsize=None)
    def message_class(self, full_name):
        """The class of message C{full_name}, or None if it is not defined."""
        try:
            descriptor = self.pool.FindMessageTypeByName(full_name)
        except KeyError:
            return None
        return message_factory.GetMessageClass(descriptor)

    def kind_message(self, api_version, kind):
        """The message class of C{kind} in C{api_version}, or None."""
        key = (api_version, kind)
        try:
            return self._kinds[key]
        except KeyError:
            cls = self._kinds[key] = self._find_kind(api_version, kind)
            return cls

    def _find_kind(self, api_version, kind):
        group, _, version = api_version.rpartition("/")
        cls = self.message_class(f"{package_of(group, version)}.{kind}")
        if cls is None and kind in _META_KINDS:
            cls = self.message_class(f"{META_PACKAGE}.{kind}")
        return cls


#: Kinds defined by the meta group that any version serves.
_META_KINDS = frozenset(("Status", "DeleteOptions", "WatchEvent", "CreateOptions",
                         "UpdateOptions", "PatchOptions", "GetOptions",
                         "PartialObjectMetadata", "PartialObjectMetadataList"))


def package_of(group, version):
    """C{orch.api.apps.v1} for C{apps/v1}; C{orch.api.core.v1} for the core group."""
    label = group.split(".", 1)[0] if group else "core"
    return f"orch.api.{label}.{version}"


@functools.lru_cache(maxsize=None)
def schema():
    """The schema of the definition files shipped with orchd (built once)."""
    return Schema()
