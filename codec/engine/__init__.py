"""The schema engine: format-blind, no I/O.

Everything a declaration in :mod:`codec.schemas` means, derived once from it: records parsed,
built and checked (:mod:`~codec.engine.records`, :mod:`~codec.engine.constraints`), how bad a
finding is (:mod:`~codec.engine.severity`), structured payloads and their nesting
(:mod:`~codec.engine.payload`, :mod:`~codec.engine.nesting`), typed metadata values and element
types (:mod:`~codec.engine.values`, :mod:`~codec.engine.dtypes`), tables held as numpy columns
(:mod:`~codec.engine.columns`, :mod:`~codec.engine.rowscan`, :mod:`~codec.engine.table`) and the
relations between fields (:mod:`codec.engine.relations`).

May import: :mod:`codec.schemas`, :mod:`codec.errors`, :mod:`codec.ui` -- nothing above
(``tests/test_layers.py``).
"""
