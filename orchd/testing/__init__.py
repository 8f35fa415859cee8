"""
orchd inside a test: a real control plane started in well under a second.

C{ControlPlane} runs blocking in a background reactor thread (scripts,
pytest) and C{start} on a trial test's reactor; see
L{orchd.testing.controlplane} for the public API.
"""

from orchd.testing.controlplane import ControlPlane, start
from orchd.testing.requests import Request

__all__ = ["ControlPlane", "Request", "start"]
