"""``.npz`` archives (several named ``.npy`` members in a zip file), read within limits:
at most :data:`MAX_MEMBERS` members, counted from the archive's end record before zipfile
reads its central directory; each member named once, stored or deflated (as numpy writes
them: zipfile inflates bzip2 and lzma without bounding their output), and at most ``size``
bytes in all once decompressed."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Callable
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from service.codecs import npy
from service.codecs.types import MEDIA_TYPES, Buffer, Encoded, little_endian
from service.errors import InvalidInput, Limit, MalformedBody
from service.text import shown

MAX_MEMBERS: Final = 16
# Decompressed bytes read (and held) at a time.
_PIECE: Final = 1 << 20
# The central directory's bytes: 16 entries of numpy's are about 1,500.
_MAX_DIRECTORY: Final = 64 << 10
_END: Final = struct.Struct("<4s4H2LH")  # end of central directory record
_LOCATOR: Final = struct.Struct("<4sLQL")  # ZIP64 end of central directory locator
_END64: Final = struct.Struct("<4sQ2H2L4Q")  # ZIP64 end of central directory record
_READ: Final = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}
_METHODS: Final = {9: "deflate64", 12: "bzip2", 14: "lzma", 93: "zstandard", 98: "ppmd"}
# What zipfile and its decompressors raise on a damaged archive.
_DAMAGED: Final = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,  # UnicodeDecodeError among them: a name flagged UTF-8 that is not
    RuntimeError,  # NotImplementedError among them: a newer zip version
    struct.error,
    OverflowError,
)


def encode(**arrays: NDArray[Any]) -> Encoded:
    """An uncompressed ``.npz`` archive of ``arrays``, each little-endian."""
    buffer = io.BytesIO()
    members: dict[str, Any] = {name: little_endian(array) for name, array in arrays.items()}
    np.savez(buffer, allow_pickle=False, **members)
    return {"content-type": MEDIA_TYPES["npz"]}, buffer.getvalue()


class _View(io.RawIOBase):
    """A body read in place, as zipfile reads a file (``io.BytesIO`` would copy it)."""

    def __init__(self, view: memoryview) -> None:
        super().__init__()
        self._view, self._at = view, 0

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._view = memoryview(b"")  # the body may be resized once the archive is closed
        super().close()

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        # as io.BytesIO: a negative position is refused from the start, and is the start
        # from the end or the current position (zipfile looks for a ZIP64 record so)
        if whence == io.SEEK_SET and offset < 0:
            raise ValueError(f"negative seek value {offset}")
        origin = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: len(self._view)}[whence]
        self._at = max(origin + offset, 0)
        return self._at

    def readinto(self, buffer: Any) -> int:
        piece = self._view[self._at : self._at + len(buffer)]
        buffer[: len(piece)] = piece
        self._at += len(piece)
        return len(piece)


def opened(body: Buffer) -> zipfile.ZipFile:
    """The archive, its end record checked and its central directory read (once: a body's
    :func:`unpacked_size` and :func:`decode` share it); :class:`MalformedBody` if it is not
    one."""
    view = memoryview(body)
    _check_directory(view)
    try:
        return zipfile.ZipFile(_View(view))
    except _DAMAGED as exc:
        raise MalformedBody(f"not a readable .npz archive: {_damage(exc)}") from None


def decode(
    body: Buffer,
    size: Limit,
    members: tuple[str, ...],
    required: tuple[str, ...],
    hold: Callable[[int], None] | None = None,
    archive: zipfile.ZipFile | None = None,
) -> dict[str, NDArray[Any]]:
    """The arrays of an archive whose members are among ``members`` (``required`` ones
    present), holding at most ``size`` bytes once decompressed. ``hold`` is told of the
    decompressed bytes as they are made, before they are kept (the posted-bytes budget
    counts what exists, never what the archive's directory declares); it may refuse them
    by raising. ``archive``: the body already :func:`opened`."""
    data: dict[str, bytearray] = {}
    try:
        with archive or opened(body) as archive:
            found = _members(archive.infolist(), members, required)
            room = size.value
            for name, info in found.items():
                data[name] = _read(archive, info, room, hold)
                room -= len(data[name])
                size.check_body("the decompressed .npz archive", size.value - room)
    except _DAMAGED as exc:
        raise MalformedBody(f"not a readable .npz archive: {_damage(exc)}") from None
    return {name: npy.decode(member, name) for name, member in data.items()}


def _read(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, room: int, hold: Callable[[int], None] | None
) -> bytearray:
    """A member's bytes, at most ``room`` + 1 of them, read a piece at a time, each piece
    held before it is kept."""
    out = bytearray()
    with archive.open(info) as member:
        while len(out) <= room:
            piece = member.read(min(_PIECE, room + 1 - len(out)))
            if not piece:
                break
            if hold is not None:
                hold(len(piece))
            out += piece
    return out


def unpacked_size(body: Buffer | zipfile.ZipFile) -> int:
    """The bytes the archive's members hold once decompressed, as its central directory
    declares them (zipfile yields no more than a member declares), read in place; 0 for
    an archive :func:`decode` refuses. A client's word only: it chooses a lane for the
    work, and reserves nothing."""
    try:
        archive = body if isinstance(body, zipfile.ZipFile) else opened(body)
    except MalformedBody:
        return 0
    return sum(info.file_size for info in archive.infolist()[: MAX_MEMBERS + 1])


def _check_directory(body: memoryview) -> None:
    """Refuse an archive whose end record (found as zipfile finds it) lists more than
    :data:`MAX_MEMBERS` entries or a central directory too large to hold only those."""
    end = len(body) - _END.size
    uncommented = (
        end >= 0 and _bytes(body, end, 4) == b"PK\x05\x06" and _bytes(body, end + 20, 2) == b"\0\0"
    )
    if not uncommented:
        lowest = max(len(body) - (1 << 16) - _END.size, 0)  # the comment is at most 64 KiB
        end = body[lowest:].tobytes().rfind(b"PK\x05\x06")
        if end < 0 or lowest + end + _END.size > len(body):
            raise MalformedBody("not a readable .npz archive: it has no zip end record")
        end += lowest
    *_, entries, directory, _, _ = _END.unpack_from(body, end)
    locator = max(end - _LOCATOR.size, 0)
    if _bytes(body, locator, 4) == b"PK\x06\x07" and len(body) - locator >= _LOCATOR.size:
        record = max(locator - _END64.size, 0)
        if _bytes(body, record, 4) == b"PK\x06\x06" and len(body) - record >= _END64.size:
            *_, entries, directory, _ = _END64.unpack_from(body, record)
    if entries > MAX_MEMBERS:
        raise MalformedBody(
            f"the .npz archive lists {entries:,} members; at most {MAX_MEMBERS} are read"
        )
    if directory > _MAX_DIRECTORY:
        raise MalformedBody(
            f"the .npz archive's central directory is {directory:,} bytes; at most "
            f"{_MAX_DIRECTORY:,} are read"
        )


def _bytes(body: memoryview, start: int, length: int) -> bytes:
    return body[start : start + length].tobytes()


def _members(
    infos: list[zipfile.ZipInfo], members: tuple[str, ...], required: tuple[str, ...]
) -> dict[str, zipfile.ZipInfo]:
    """The archive's members by name (without ``.npy``), each once, all readable."""
    if len(infos) > MAX_MEMBERS:  # the end record understated them
        raise MalformedBody(
            f"the .npz archive holds {len(infos):,} members; at most {MAX_MEMBERS} are read"
        )
    found: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        name = info.filename.removesuffix(".npy")
        if name in found:
            raise InvalidInput(shown(name), "appears more than once in the .npz archive")
        found[name] = info
    unknown = sorted(set(found) - set(members))
    if unknown:
        raise InvalidInput(
            shown(unknown[0]), f"is not a member this endpoint reads ({', '.join(members)})"
        )
    for name in required:
        if name not in found:
            raise InvalidInput(name, "is required in the .npz archive")
    for name, info in found.items():
        if info.flag_bits & 0x1:
            raise MalformedBody(f"{name}: the .npz member is encrypted; send it unencrypted")
        if info.compress_type not in _READ:
            method = info.compress_type
            known = f" ({_METHODS[method]})" if method in _METHODS else ""
            raise MalformedBody(
                f"{name}: the .npz member is compressed with method {method}{known}; "
                "only stored and deflated members are read, as numpy writes them"
            )
    return found


def _damage(exc: Exception) -> str:
    """What is wrong, in words that quote nothing of zipfile's own objects."""
    text = str(exc)
    if isinstance(exc, UnicodeDecodeError):
        return "a member's name is marked UTF-8 but is not valid UTF-8"
    if "CRC" in text:
        return "a member's data fails its CRC-32 check"
    if "differ" in text:
        return "a member's name differs between its local header and the central directory"
    if isinstance(exc, zlib.error):
        return "a member's deflated data is corrupt"
    if isinstance(exc, EOFError):
        return "a member's data ends early"
    if isinstance(exc, zipfile.BadZipFile | NotImplementedError) and text.isprintable():
        return text.rstrip(".") if "'" not in text and "<" not in text else "it is damaged"
    return "it is damaged"
