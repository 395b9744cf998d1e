"""What a person sees: progress bars on a terminal (:mod:`~codec.ui.progress`) and text made
safe and short for one (:mod:`~codec.ui.display`).  Used by the formats and the tools alike.

May import: :mod:`codec.errors` only (``tests/test_layers.py``).
"""
