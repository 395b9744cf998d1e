"""Hypothesis strategies derived from the schema declarations, for modelcodec's tests and
yours (``pip install 'modelcodec[testing]'``): values of every declared field and record
(:mod:`~codec.testing.strategies`) and whole tables of records with their layout
(:mod:`~codec.testing.record_strategies`, :mod:`~codec.testing.record_layout_strategies`).

May import anything of the library but the tools (``tests/test_layers.py``).
"""
