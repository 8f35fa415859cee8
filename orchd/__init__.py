"""orchd: the control plane of a container orchestration system."""

__version__ = "0.1.0"
