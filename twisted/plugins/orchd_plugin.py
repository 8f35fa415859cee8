"""The C{twistd orchd} command."""

from twisted.application.service import ServiceMaker

orchd = ServiceMaker(
    "orchd",
    "orchd.app.tap",
    "A Kubernetes-style control plane: API server, controllers and node agent",
    "orchd",
)
