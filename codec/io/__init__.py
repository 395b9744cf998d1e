"""Bytes in and bytes out, format-blind.

Safe opening and the read-only byte sources readers parse (:mod:`~codec.io.sources`), writing
files atomically (:mod:`~codec.io.atomic`), a writer's inputs checked and streamed out
(:mod:`~codec.io.writer_io`, :mod:`~codec.io.tensor_writer`), hashes over byte ranges
(:mod:`~codec.io.integrity`), HTTP(S) range reads and their disk cache (:mod:`~codec.io.remote`,
:mod:`~codec.io.cache`), the one store interface over every place bytes live -- local, HTTP,
object storage through fsspec (:mod:`~codec.io.store`, :mod:`~codec.io.store_fsspec`,
:mod:`~codec.io.open_store`) --, the files a multi-file model links (:mod:`~codec.io.links`) and the
small Range-capable HTTP server of the demo (:mod:`~codec.io.http_server`).

May import: :mod:`codec.schemas`, :mod:`codec.errors`, :mod:`codec.ui`, :mod:`codec.engine`
(``tests/test_layers.py``).
"""
