"""ZIP archives written as a stream: each member's bytes handed on as soon as it is written,
never sought back to, so that an archive of an hour's frames never sits in memory whole.

Each member is one frame's file, whole in memory while it is written: its sizes and CRC go in
its local header, as in any ZIP. What stays until the end is the central directory, kept as
its own bytes (46 bytes and the name a member: 5 MB for the 86,400 frames of an hour), not as
``zipfile``'s record of each member, which took about 350 bytes more, and with the allocator's
fragments of as many small objects, measured at 1 KB a frame in an export process. Past 65,535
members, or 4 GiB, the archive has the ZIP64 end records (and a member past 4 GiB its offset in
a ZIP64 extra field), as ``zipfile`` and ``unzip`` read them.
"""

from __future__ import annotations

import struct
import time
import zlib

STORED, DEFLATED = 0, 8
_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_END = struct.Struct("<IHHHHIIH")
_END64 = struct.Struct("<IQHHIIQQQQ")
_END64_LOCATOR = struct.Struct("<IIQI")
_MADE_BY = (3 << 8) | 45  # Unix, ZIP 4.5 (ZIP64)
_NEEDED = 20  # ZIP 2.0: deflate
_NEEDED64 = 45
_FILE_MODE = 0o100600 << 16  # a regular file, readable by its owner, as zipfile writes one
_LIMIT = 0xFFFFFFFF
_COUNT_LIMIT = 0xFFFF


class ZipStream:
    """An archive written member by member: :meth:`add` and :meth:`close` answer the bytes
    each wrote, in order; their concatenation is the archive."""

    def __init__(self, *, compression: int) -> None:
        self._compression = compression
        self._directory = bytearray()
        self._count = 0
        self._offset = 0  # bytes written so far
        now = time.localtime()
        self._time = (now.tm_hour << 11) | (now.tm_min << 5) | (now.tm_sec // 2)
        self._date = ((now.tm_year - 1980) << 9) | (now.tm_mon << 5) | now.tm_mday

    def add(self, name: str, data: bytes | str) -> bytes:
        """The bytes of member ``name`` holding ``data`` (a text as UTF-8)."""
        raw = data.encode() if isinstance(data, str) else data
        crc = zlib.crc32(raw)
        if self._compression == DEFLATED:
            packer = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
            packed = packer.compress(raw) + packer.flush()
        else:
            packed = raw
        encoded = name.encode()
        flags = 0 if encoded.isascii() else 0x800  # the name in UTF-8
        local = _LOCAL.pack(
            0x04034B50,
            _NEEDED,
            flags,
            self._compression,
            self._time,
            self._date,
            crc,
            len(packed),
            len(raw),
            len(encoded),
            0,
        )
        extra = b""
        offset = self._offset
        if offset >= _LIMIT:
            extra = struct.pack("<HHQ", 1, 8, offset)
            offset = _LIMIT
        self._directory += _CENTRAL.pack(
            0x02014B50,
            _MADE_BY,
            _NEEDED64 if extra else _NEEDED,
            flags,
            self._compression,
            self._time,
            self._date,
            crc,
            len(packed),
            len(raw),
            len(encoded),
            len(extra),
            0,
            0,
            0,
            _FILE_MODE,
            offset,
        )
        self._directory += encoded + extra
        self._count += 1
        member = local + encoded + packed
        self._offset += len(member)
        return member

    def close(self) -> bytes:
        """The archive's end: its central directory and end records."""
        start, size, count = self._offset, len(self._directory), self._count
        tail = bytes(self._directory)
        self._directory = bytearray()
        if count > _COUNT_LIMIT or start >= _LIMIT or size >= _LIMIT:
            end64_at = start + size
            tail += _END64.pack(
                0x06064B50, 44, _MADE_BY, _NEEDED64, 0, 0, count, count, size, start
            )
            tail += _END64_LOCATOR.pack(0x07064B50, 0, end64_at, 1)
            count = min(count, _COUNT_LIMIT)
            size, start = min(size, _LIMIT), min(start, _LIMIT)
        tail += _END.pack(0x06054B50, 0, 0, count, count, size, start, 0)
        return tail
