# -*- test-case-name: tests.api.test_tables -*-
"""
The server-side printers of the built-in kinds: the columns C{kubectl get}
shows, one L{Printer} per C{(group, kind)}, grouped by API group.

Kinds without an entry get the default table (Name, Created At), as kinds
without a printer do upstream. L{orchd.api.tables} builds the Tables.
"""

from orchd.api.printers import cluster, core, events, networking, storage, workloads


def _merge(*modules):
    merged = {}
    for module in modules:
        for key, printer in module.PRINTERS.items():
            if key in merged:
                raise ValueError(f"two printers for {key}")
            merged[key] = printer
    return merged


#: C{(group, kind)} to its L{Printer}.
PRINTERS = _merge(core, events, workloads, networking, storage, cluster)
