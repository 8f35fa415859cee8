"""
The schema engine of custom resources: structural checks of an
C{openAPIV3Schema} (L{structural_errors}) and, per served version, a
compiled L{CustomResourceSchema} that defaults, prunes and validates
objects with upstream's messages and field paths, evaluates CEL rules,
and gives server-side apply its list and map types.

Pure functions and classes of the api layer: no I/O, no reactor.
"""

from orchd.api.crdschema.schema import CustomResourceSchema, structural_errors

__all__ = ["CustomResourceSchema", "structural_errors"]
