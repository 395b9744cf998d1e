"""One module (or package) per format: what cannot be declared -- chunk semantics, payload
decoding, readers and writers, and the format's ``DESCRIPTOR`` -- plus what formats share
without naming one: :mod:`~codec.formats.hooks` (what a format gives the demo and the C++
generator), :mod:`~codec.formats.tensor_rows` (formats whose tensors are one table's rows),
:mod:`~codec.formats.multifile` (a model in several files) and :mod:`~codec.formats.mirror`.

May import: :mod:`codec.schemas`, :mod:`codec.errors`, :mod:`codec.ui`, :mod:`codec.engine`,
:mod:`codec.io`, :mod:`codec.model`, :mod:`codec.registry` (``tests/test_layers.py``); a
format's name appears only in its own schema and format modules (``tests/test_registry.py``).
"""
