"""Declarative format schemas: construct Structs, enums, limits and payload shapes.

Pure declarations (no I/O).  ``codec`` derives parsing, building, validation, documentation and
test strategies from them.  One module per format: ``schemas.aero`` ...
"""
from . import aero, aeroset, dsl, gguf, http, mag, oinf, safetensors, stb

FORMATS = {"aero": aero, "aeroset": aeroset, "mag": mag, "oinf": oinf, "stb": stb, "safetensors": safetensors,
           "gguf": gguf}

__all__ = ["aero", "aeroset", "dsl", "gguf", "http", "mag", "oinf", "safetensors", "stb", "FORMATS"]
