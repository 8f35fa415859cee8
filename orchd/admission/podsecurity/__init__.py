"""
Pod security admission: the Pod Security Standards, chosen per namespace.

L{levels} reads a namespace's C{pod-security.orch.io/*} labels, L{checks}
holds one small function per control, L{admission} applies them to pod
writes.
"""
