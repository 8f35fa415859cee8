# -*- test-case-name: tests.api.test_tables -*-
"""
The server-side printers of the built-in kinds: the columns C{kubectl get}
shows, one L{Printer<orchd.api.printers.base.Printer>} per kind, grouped by
API group. A kind's printer is the C{printer} of its
L{orchd.api.kinds.KindInfo}, named in its row of
L{orchd.registry.kinds.builtin}.

Kinds without one get the default table (Name, Created At), as kinds
without a printer do upstream. L{orchd.api.tables} builds the Tables.
"""
