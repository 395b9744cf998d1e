"""The tools on top of the library: the ``modelcodec`` command line (:mod:`~codec.tools.cli`),
its demo (:mod:`~codec.tools.demo`), the human view of a file (:mod:`~codec.tools.verify`), the
format reference rendered from the schemas (:mod:`~codec.tools.docs`) and the C++ header
generator (:mod:`~codec.tools.cgen`, :mod:`~codec.tools.cgen_emit`).

May import anything of the library; nothing of the library imports them
(``tests/test_layers.py``).
"""
