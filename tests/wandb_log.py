"""Read a W&B offline run file (`run-<id>.wandb`) back, record by record, without wandb's own reader.

The format (W&B's transaction log, LevelDB's log format with its own header): a 7-byte header
`:W&B`, magic 0xBEE1 (little-endian uint16), version 0; then 32 KiB blocks of chunks, each a 7-byte
header (CRC-32 of the type byte then the data, little-endian uint32; length, uint16; type, uint8:
1 full, 2 first, 3 middle, 4 last) and its data; fewer than 7 bytes left in a block are padding.
Each whole record is a protobuf `wandb.proto.wandb_internal_pb2.Record`.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

BLOCK = 32768
HEADER = struct.Struct("<4sHB")
CHUNK = struct.Struct("<IHB")
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[bytes]:
    data = path.read_bytes()
    ident, magic, version = HEADER.unpack_from(data, 0)
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), (ident, magic, version)
    out: list[bytes] = []
    pending = b""
    pos = HEADER.size
    while pos + CHUNK.size <= len(data):
        left = BLOCK - pos % BLOCK
        if left < CHUNK.size:
            pos += left
            continue
        crc, length, kind = CHUNK.unpack_from(data, pos)
        body = data[pos + CHUNK.size: pos + CHUNK.size + length]
        if kind == 0 and length == 0:
            break  # preallocated zeros: the end of what was written
        assert zlib.crc32(body, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF == crc, f"bad checksum at {pos}"
        pos += CHUNK.size + length
        if kind == FULL:
            out.append(body)
        elif kind == FIRST:
            pending = body
        elif kind == MIDDLE:
            pending += body
        elif kind == LAST:
            out.append(pending + body)
            pending = b""
    return out


def parsed(path: Path) -> list[tuple[str, Any]]:
    """(record type, protobuf message) for each record."""
    from wandb.proto import wandb_internal_pb2 as pb

    result = []
    for raw in records(path):
        record = pb.Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        result.append((str(kind), getattr(record, str(kind)) if kind else None))
    return result
