"""Reader for the IDX format MNIST ships in (plain or gzip), with errors a user can act on."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from frd.errors import FrdError

_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
"""IDX type codes (third magic byte) → big-endian numpy dtypes."""


def read_idx(path: str | Path) -> np.ndarray:
    """The array stored in an IDX file; gzip is recognised by its magic bytes, not the name."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise FrdError(f"{path} is a damaged gzip file ({exc}); delete it and fetch it again") from None
    if len(raw) < 4 or raw[:2] != b"\x00\x00" or raw[2] not in _DTYPES:
        raise FrdError(f"{path} is not an IDX file (bad magic number); expected an MNIST-style "
                       "*-idx?-ubyte file")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise FrdError(f"{path} is truncated: its IDX header is incomplete; fetch the file again")
    shape = tuple(int(n) for n in np.frombuffer(raw, ">u4", ndim, offset=4))
    dtype = np.dtype(_DTYPES[raw[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header != expected:
        raise FrdError(f"{path} holds {len(raw) - header} data bytes but its header announces "
                       f"shape {shape} ({expected} bytes); fetch the file again")
    return np.frombuffer(raw, dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))
