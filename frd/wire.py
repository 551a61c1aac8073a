"""A ``Payload`` as bytes, for transports that cross a real connection (Flower).

Layout: ``FRDW`` · header length (4 bytes, little-endian) · a JSON header (kind, entries and, per
array, name, dtype, shape, bits per element, packed, byte count) · the arrays' bytes in header
order. Only numpy and JSON: nothing on the wire is ever executed (no pickle).

An integer array whose declared width is narrower than its dtype (an index of
``index_bits(n)`` bits) travels packed to that width when every value fits, so the wire carries
close to what the ledger charges; every other array travels as its raw bytes. Decoding gives
back the same kind, entries, names, dtypes, shapes, values and bits.
"""
from __future__ import annotations

import json
import struct

import numpy as np

from frd.errors import FrdError
from frd.payload import Array, Payload

MAGIC = b"FRDW"
_LENGTH = struct.Struct("<I")


def _packable(values: np.ndarray, bits: int) -> bool:
    """An integer array whose values all lie in [0, 2**bits) for a width below its dtype's."""
    if values.dtype.kind not in "iu" or bits >= values.dtype.itemsize * 8 or values.size == 0:
        return False
    return bool(values.min() >= 0 and values.max() < (1 << bits))


def _pack(values: np.ndarray, bits: int) -> bytes:
    flat = values.reshape(-1).astype(np.uint64)
    planes = (flat[:, None] >> np.arange(bits, dtype=np.uint64)) & np.uint64(1)
    return np.packbits(planes.astype(np.uint8).reshape(-1), bitorder="little").tobytes()


def _unpack(raw: bytes, bits: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    count = int(np.prod(shape, dtype=np.int64))
    planes = np.unpackbits(np.frombuffer(raw, np.uint8), count=count * bits, bitorder="little")
    weights = np.uint64(1) << np.arange(bits, dtype=np.uint64)
    return (planes.reshape(count, bits).astype(np.uint64) @ weights).astype(dtype).reshape(shape)


def encode(payload: Payload) -> bytes:
    """``payload`` as bytes (see the module docstring); a decoded payload as it crossed its codec."""
    payload = payload.crossed or payload
    entries, blobs = [], []
    for name, array in payload.arrays.items():
        values = np.ascontiguousarray(array.values)
        if values.dtype.hasobject or values.dtype.names is not None:
            raise FrdError(f"payload array {name!r} has dtype {values.dtype}, which has no wire form; "
                           "send plain numeric arrays")
        packed = _packable(values, array.bits_per_element)
        blob = _pack(values, array.bits_per_element) if packed else values.tobytes()
        entries.append(dict(name=name, dtype=values.dtype.str, shape=list(values.shape),
                            bits=int(array.bits_per_element), packed=packed, nbytes=len(blob)))
        blobs.append(blob)
    header = json.dumps(dict(kind=payload.kind, entries=int(payload.entries), arrays=entries)).encode()
    return b"".join([MAGIC, _LENGTH.pack(len(header)), header, *blobs])


def decode(data: bytes) -> Payload:
    """The payload ``encode`` wrote; anything else is an ``FrdError``."""
    if data[:4] != MAGIC or len(data) < 8:
        raise FrdError("not an frd payload on the wire (bad magic); both ends must run the same frd")
    (length,) = _LENGTH.unpack_from(data, 4)
    header = json.loads(data[8:8 + length])
    offset, arrays = 8 + length, {}
    for entry in header["arrays"]:
        raw = data[offset:offset + entry["nbytes"]]
        offset += entry["nbytes"]
        dtype, shape = np.dtype(entry["dtype"]), tuple(entry["shape"])
        values = (_unpack(raw, entry["bits"], dtype, shape) if entry["packed"]
                  else np.frombuffer(raw, dtype).reshape(shape).copy())
        arrays[entry["name"]] = Array(values, entry["bits"])
    if offset != len(data):
        raise FrdError(f"frd payload on the wire has {len(data) - offset} trailing bytes; it was cut or corrupted")
    return Payload(header["kind"], arrays, header["entries"])
