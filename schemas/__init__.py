"""Declarative format schemas: construct Structs, enums, limits and payload shapes.

Pure declarations (no I/O).  ``codec`` derives parsing, building, validation, documentation and
test strategies from them.  One module per format: ``schemas.aero`` ...
"""
from . import aero, dsl, mag, stb

FORMATS = {"aero": aero, "mag": mag, "stb": stb}

__all__ = ["aero", "dsl", "mag", "stb", "FORMATS"]
