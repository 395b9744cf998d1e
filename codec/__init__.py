"""modelcodec: read, write, validate and inspect model-weight containers.

    import codec
    with codec.open("model.bin") as r:           # format detected by magic, else by name
        r.format, r.metadata, list(r.tensors)
        w = r.tensor("layer.0.weight")           # read-only zero-copy numpy view
        report = r.validate(full=True)           # .ok, .violations
    codec.write(path, {"w": array}, format=name)  # or the format path's extension names

Every error about bad data derives from :class:`codec.FormatError`.
"""
from __future__ import annotations

import os as _os
import sys as _sys


def _load_schemas() -> None:
    """``codec.schemas``: installed inside the package (the build maps the repository's
    ``schemas/`` folder there); run from a checkout, the ``schemas/`` folder beside ``codec/``."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    if "codec.schemas" in _sys.modules or _os.path.isdir(_os.path.join(here, "schemas")):
        return
    import importlib.util
    folder = _os.path.join(_os.path.dirname(here), "schemas")
    spec = importlib.util.spec_from_file_location("codec.schemas", _os.path.join(folder, "__init__.py"),
                                                  submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    _sys.modules["codec.schemas"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del _sys.modules["codec.schemas"]
        raise
    globals()["schemas"] = module


_load_schemas()

from . import errors  # noqa: E402
from .errors import (  # noqa: E402
    FormatError, IntegrityError, ModelcodecError, NotFoundError, NotLocalError, UnsupportedVersionError, UsageError,
)
from .model import Packed, Reader, Report, TensorInfo  # noqa: E402

try:
    from importlib.metadata import PackageNotFoundError as _NotInstalled, version as _version
    __version__ = _version("modelcodec")
except _NotInstalled:  # run from a checkout that was never installed
    __version__ = "0+unknown"


from .api import open, update_set, validate, write  # noqa: E402,A001  (codec.open shadows the builtin on purpose)
from .convert import convert, dequantize, load, save  # noqa: E402
from .compare import Diff, TensorDiff, diff  # noqa: E402
from .formats.mirror import mirror  # noqa: E402

__all__ = ["__version__", "open", "validate", "write", "convert", "dequantize", "load", "save", "mirror", "update_set",
           "diff", "Diff", "TensorDiff", "errors", "FormatError", "IntegrityError", "ModelcodecError", "NotFoundError",
           "NotLocalError",
           "UnsupportedVersionError", "UsageError", "Packed", "Reader", "Report", "TensorInfo"]
