"""
The built-in kinds: their table (L{orchd.registry.kinds.builtin}, one row
per kind), and the strategies of the kinds that have rules of their own,
one module each. Every other kind gets L{orchd.registry.strategy.DefaultStrategy}.
"""
