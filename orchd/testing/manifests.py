# -*- test-case-name: tests.testing.test_units -*-
"""YAML manifests from files and folders, for L{orchd.testing.ControlPlane}."""

import os

import yaml


def manifest_files(paths):
    """
    The YAML files of C{paths} (files, or folders read in name order).

    @raise FileNotFoundError: for a path that does not exist.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = []
    for path in paths:
        path = os.fspath(path)
        if os.path.isdir(path):
            files.extend(os.path.join(path, name) for name in sorted(os.listdir(path))
                         if name.endswith((".yaml", ".yml", ".json")))
        elif os.path.exists(path):
            files.append(path)
        else:
            raise FileNotFoundError(2, "no such manifest file or folder", path)
    return files


def load_manifests(paths):
    """Every document (a mapping) of the files of C{paths}, in order."""
    documents = []
    for path in manifest_files(paths):
        with open(path, "rb") as f:
            for document in yaml.safe_load_all(f):
                if isinstance(document, dict):
                    if document.get("kind", "").endswith("List"):
                        documents.extend(document.get("items") or ())
                    else:
                        documents.append(document)
    return documents
