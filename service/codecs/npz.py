"""``.npz`` archives (several named ``.npy`` members in a zip file), read within a limit
on their decompressed size."""

from __future__ import annotations

import io
import zipfile
import zlib
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.codecs import npy
from service.codecs.types import MEDIA_TYPES, Buffer, Encoded, little_endian
from service.errors import InvalidInput, Limit, MalformedBody


def encode(**arrays: NDArray[Any]) -> Encoded:
    """An uncompressed ``.npz`` archive of ``arrays``, each little-endian."""
    buffer = io.BytesIO()
    members: dict[str, Any] = {name: little_endian(array) for name, array in arrays.items()}
    np.savez(buffer, allow_pickle=False, **members)
    return {"content-type": MEDIA_TYPES["npz"]}, buffer.getvalue()


def decode(
    body: Buffer, size: Limit, members: tuple[str, ...], required: tuple[str, ...]
) -> dict[str, NDArray[Any]]:
    """The arrays of an archive whose members are among ``members`` (``required`` ones
    present), holding at most ``size`` bytes once decompressed."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(body))
        found = {info.filename.removesuffix(".npy"): info for info in archive.infolist()}
        unknown = sorted(set(found) - set(members))
        if unknown:
            raise InvalidInput(
                unknown[0], f"is not a member this endpoint reads ({', '.join(members)})"
            )
        for name in required:
            if name not in found:
                raise InvalidInput(name, "is required in the .npz archive")
        arrays: dict[str, NDArray[Any]] = {}
        room = size.value
        for name, info in found.items():
            with archive.open(info) as member:
                data = member.read(room + 1)
            room -= len(data)
            size.check_body("the decompressed .npz archive", size.value - room)
            arrays[name] = npy.decode(data, name)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise MalformedBody(f"not a readable .npz archive: {exc}") from None
    return arrays
