"""Loads the compiled fast paths of the codec (``_native.c``). SHELL: a shared library and an env switch.

``NATIVE`` is the ready module, or None when the codec must run its pure-Python path: the extension
was not built (no C compiler at install time), ISA-L's CRC32 symbol cannot be found, or the operator
set ``MQHA_PURE_PYTHON_CODEC=1``. Both paths store and accept exactly the same bytes; the compiled one
is only faster (docs/performance.md). ``NATIVE_STATUS`` says which path runs and why, for logs.

The CRC is ISA-L's ``crc32_gzip_refl``, the function behind ``isal_zlib.crc32``, looked up in the
isal package's own extension module: one CRC implementation for both paths, and no build-time
dependency on zlib's headers. A self-test against the standard CRC32 check value guards the lookup.
"""

from __future__ import annotations

import ctypes
import os
from types import ModuleType

from isal import isal_zlib

PURE_PYTHON_ENV = "MQHA_PURE_PYTHON_CODEC"
_CHECK_INPUT, _CHECK_VALUE = b"123456789", 0xCBF43926  # the CRC-32 catalogue's check value


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None, f"pure Python ({PURE_PYTHON_ENV} is set)"
    try:
        from mqha.broker.commitlog import _native
    except ImportError as exc:
        return None, f"pure Python (the compiled codec is not built: {exc})"
    try:
        function = ctypes.CDLL(isal_zlib.__file__).crc32_gzip_refl
    except (OSError, AttributeError) as exc:
        return None, f"pure Python (ISA-L's crc32_gzip_refl not found in {isal_zlib.__file__}: {exc})"
    _native.set_crc32(ctypes.cast(function, ctypes.c_void_p).value)
    if _native.crc32(_CHECK_INPUT) != _CHECK_VALUE or _native.crc32(b"56789", _native.crc32(b"1234")) != (
        _CHECK_VALUE
    ):
        return None, "pure Python (ISA-L's crc32_gzip_refl failed the CRC32 self-test)"
    return _native, "compiled (mqha/broker/commitlog/_native.c)"


NATIVE, NATIVE_STATUS = _load()
