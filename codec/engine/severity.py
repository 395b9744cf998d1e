"""How bad a finding is: a property of its rule and of the reader's mode, declared in the
schemas and decided by the report -- not carried by the error object.

- a rule of a relation kind that only warns (``Known``: a kind of row this version does not know,
  which readers skip) is a warning;
- a rule a schema lists in ``WARNINGS`` is a warning (data a format allows but other formats
  or readers may take differently, e.g. a bool byte other than 0 or 1);
- a rule a schema lists in ``RELAXABLE`` is a warning for a lenient reader (``strict=False``);
- every other rule is an error.
"""
from __future__ import annotations

from functools import lru_cache


def warning_rules(relations) -> set[str]:
    """The rules of the relations that only warn."""
    return {str(r.rule) for r in relations if getattr(r, "warns", False)}


@lru_cache(maxsize=1)
def _declared() -> tuple[frozenset, frozenset]:
    from .. import schemas
    mods = list(schemas.FORMATS.values())
    mods += [r for m in mods for r in getattr(m, "RELATED", ())]
    warn: set[str] = set()
    relax: set[str] = set()
    for m in mods:
        relax.update(str(r) for r in getattr(m, "RELAXABLE", ()))
        warn.update(str(r) for r in getattr(m, "WARNINGS", ()))
        for k, v in vars(m).items():
            if k.endswith("RELATIONS") and isinstance(v, tuple):
                warn |= warning_rules(v)
    return frozenset(warn), frozenset(relax)


@lru_cache(maxsize=4096)
def of(rule: str, strict: bool = True) -> str:
    """"error" or "warning": what a finding of ``rule`` is for a strict or lenient reader (a
    report asks once per finding and per question: one answer per rule and mode)."""
    warn, relax = _declared()
    return "warning" if rule in warn or (not strict and rule in relax) else "error"
