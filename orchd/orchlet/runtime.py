# -*- test-case-name: tests.orchlet.test_simulated -*-
"""
The container runtime interface: what the node agent asks of whatever runs
containers.

The agent hands it the pods bound to its node and reads back their states,
logs and statistics; the HTTPS endpoint asks it for checkpoints. Every
method may answer at once or with a Deferred/coroutine (callers await).
"""

from zope.interface import Attribute, Interface


class RuntimeError_(Exception):
    """The runtime failed an operation; the text says why (500 on the endpoint)."""


class CheckpointUnsupported(RuntimeError_):
    """This runtime cannot checkpoint containers (500 on the endpoint)."""


class UnknownContainer(LookupError):
    """No such pod or container here; C{what} is C{"pod"} or C{"container"} (404)."""

    def __init__(self, what, name):
        super().__init__(f"{what} {name} does not exist")
        self.what = what
        self.name = name


class IRuntimeObserver(Interface):
    """Who hears what a runtime does by itself (the node agent)."""

    def pod_changed(namespace, name):
        """The status of pod C{namespace/name} changed; read it with C{pod_status}."""

    def pod_event(pod, type, reason, message, field_path):
        """
        Record an event about C{pod} (the Pod object).

        @param type: C{Normal} or C{Warning}.
        @param field_path: the container it is about (C{spec.containers{name}}), or None.
        """


class IRuntime(Interface):
    """Runs the containers of the pods bound to one node."""

    name = Attribute("The runtime's name and version, e.g. 'simulated://1.0' "
                     "(status.nodeInfo.containerRuntimeVersion).")
    default_checkpoint_timeout = Attribute("Seconds a checkpoint may take when the caller "
                                           "gives no timeout (or 0).")

    def observe(observer):
        """Tell C{observer} (an L{IRuntimeObserver}) of status changes and events from now on."""

    def sync_pod(pod):
        """
        Make the pod run as its spec says: start containers not yet started.
        Called again whenever the pod object changes; must be idempotent.

        @param pod: the Pod as the API serves it (dict), bound to this node.
        """

    def stop_pod(namespace, name, grace):
        """
        Stop the pod's containers, giving them C{grace} seconds; the pod is
        kept, with a terminal status, until L{kill_pod}. Called again, it
        may shorten the time left.

        @return: a Deferred firing once every container has stopped (at
            once for a pod it does not run).
        """

    def kill_pod(namespace, name):
        """Stop the pod's containers at once and forget it; unknown pods are ignored."""

    def close():
        """The node agent stops: cancel whatever the runtime has scheduled (its pods stay)."""

    def pod_status(namespace, name):
        """The status to report for one pod (as in L{pods}), or None if it does not run it."""

    def pods():
        """
        The pods it runs: C{[(pod dict, status dict)]}, where status is the
        Pod C{status} to report (phase, conditions, hostIP, podIP, startTime,
        containerStatuses with name, state, lastState, ready, restartCount,
        image, imageID, containerID, started).
        """

    def container_logs(namespace, pod, container):
        """
        The log of one container, as bytes (lines ending in newlines).

        @raise UnknownContainer: for an unknown pod or container.
        """

    def stats():
        """
        Usage figures for the stats endpoints: C{{"node": {...}, "pods": [...]}}
        in the shape of the Summary of REFERENCE section 10 (without
        C{nodeName}, which the agent fills in).
        """

    def checkpoint(namespace, pod, container, path, timeout):
        """
        Write a checkpoint archive of one container at C{path}.

        @param timeout: seconds allowed (already defaulted by the caller).
        @raise UnknownContainer: for an unknown pod or container.
        @raise CheckpointUnsupported: when this runtime cannot checkpoint.
        @raise RuntimeError_: when checkpointing failed.
        """
