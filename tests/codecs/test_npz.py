"""``.npz`` archives: members named and bounded once decompressed."""

from __future__ import annotations

import io
import struct
import tracemalloc
import warnings
import zipfile
from typing import Any

import numpy as np
import pytest

from service.codecs import npz
from service.errors import BodyTooLarge, InvalidInput, Limit, MalformedBody
from tests.support import npy_bytes

MEMBERS = ("embeddings", "position_ids")
ROOMY = Limit(1 << 20, "PE_MAX_BODY_BYTES")


def archive(compressed: bool = False, **arrays: Any) -> bytes:
    buffer = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buffer, **arrays)
    return buffer.getvalue()


def test_round_trip() -> None:
    x = np.arange(12, dtype=">f4").reshape(3, 4)
    headers, body = npz.encode(embeddings=x)
    assert headers == {"content-type": "application/x-npz"}
    arrays = npz.decode(body, ROOMY, MEMBERS, required=MEMBERS[:1])
    assert arrays["embeddings"].dtype == np.dtype("<f4")
    assert np.array_equal(arrays["embeddings"], x)


def test_members_are_checked() -> None:
    with pytest.raises(InvalidInput, match="member") as unknown:
        npz.decode(archive(embeddings=np.ones(2), other=np.ones(1)), ROOMY, MEMBERS, MEMBERS[:1])
    assert unknown.value.name == "other"
    with pytest.raises(InvalidInput, match="required") as missing:
        npz.decode(archive(position_ids=np.ones(2)), ROOMY, MEMBERS, MEMBERS[:1])
    assert missing.value.name == "embeddings"


def test_the_decompressed_size_is_bounded() -> None:
    bomb = archive(compressed=True, embeddings=np.zeros((300, 300), np.float32))
    assert len(bomb) < 10_000
    with pytest.raises(BodyTooLarge) as caught:
        npz.decode(bomb, Limit(100_000, "PE_MAX_BODY_BYTES"), MEMBERS, MEMBERS[:1])
    assert caught.value.extensions["setting"] == "PE_MAX_BODY_BYTES"


def test_garbage_is_malformed() -> None:
    with pytest.raises(MalformedBody, match=r"\.npz"):
        npz.decode(b"PK\x03\x04 not really", ROOMY, MEMBERS, MEMBERS[:1])


EOCD = struct.Struct("<4s4H2LH")
ONE = npy_bytes(np.ones((2, 3), np.float32))


def zipped(*members: tuple[str, bytes], method: int = zipfile.ZIP_STORED) -> bytes:
    """A zip of ``members`` (a name may come twice), each compressed with ``method``."""
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w", method) as archive:
        warnings.simplefilter("ignore")  # "Duplicate name": that is the point
        for name, data in members:
            archive.writestr(name, data)
    return buffer.getvalue()


def patched(body: bytes, signature: bytes, field: int, value: bytes) -> bytes:
    """``body`` with ``value`` written at ``field`` bytes into every record ``signature``
    starts (local headers ``PK\\3\\4``, directory entries ``PK\\1\\2``)."""
    out = bytearray(body)
    at = out.find(signature)
    while at >= 0:
        out[at + field : at + field + len(value)] = value
        at = out.find(signature, at + 4)
    return bytes(out)


def both_headers(body: bytes, local: int, central: int, value: bytes) -> bytes:
    return patched(patched(body, b"PK\x03\x04", local, value), b"PK\x01\x02", central, value)


def directory(body: bytes) -> tuple[bytes, bytes]:
    """The bytes before a one-member archive's central directory, and that directory."""
    *_, size, offset, _ = EOCD.unpack(body[-22:])
    return body[:offset], body[offset : offset + size]


def repeated(count: int, told: int | None = None, zip64: bool = False) -> bytes:
    """An archive whose central directory lists its one member ``count`` times; its end
    record says ``told`` (in a ZIP64 end record with ``zip64``)."""
    head, entry = directory(zipped(("embeddings.npy", ONE)))
    listed = entry * count
    told = count if told is None else told
    short = min(told, 0xFFFF)
    end = EOCD.pack(b"PK\x05\x06", 0, 0, short, short, len(listed), len(head), 0)
    if not zip64:
        return head + listed + end
    at = len(head) + len(listed)
    record = struct.pack(
        "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, told, told, len(listed), len(head)
    )
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, at, 1)
    end = EOCD.pack(b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return head + listed + record + locator + end


def corrupted(body: bytes, at: int) -> bytes:
    out = bytearray(body)
    out[at] ^= 0xFF
    return bytes(out)


BZIP2 = zipped(("embeddings.npy", ONE), method=zipfile.ZIP_BZIP2)
LZMA = zipped(("embeddings.npy", ONE), method=zipfile.ZIP_LZMA)
STORED = zipped(("embeddings.npy", ONE))
INVALID_UTF8 = zipped(("Zmbeddings.npy", ONE)).replace(b"Zmbeddings", b"\xffmbeddings")
MALFORMED_ARCHIVES = [
    pytest.param(both_headers(STORED, 6, 8, b"\x01\x00"), "encrypted", id="encrypted"),
    pytest.param(corrupted(BZIP2, 60), "bzip2", id="corrupt-bzip2"),
    pytest.param(corrupted(LZMA, 60), "lzma", id="corrupt-lzma"),
    pytest.param(BZIP2, "bzip2", id="bzip2"),
    pytest.param(LZMA, "lzma", id="lzma"),
    pytest.param(both_headers(STORED, 8, 10, b"\x63\x00"), "method 99", id="method-99"),
    pytest.param(both_headers(STORED, 8, 10, b"\x09\x00"), "method 9", id="deflate64"),
    pytest.param(patched(STORED, b"PK\x01\x02", 6, b"\xff\x00"), "version", id="version-25.5"),
    pytest.param(
        STORED[:-22] + STORED[-22:-6] + b"\xff\xff\x00\x00\x00\x00", ".npz", id="cd-offset"
    ),
    pytest.param(
        STORED[:-22] + STORED[-22:-10] + b"\xff\xff\xff\x00" + STORED[-6:], ".npz", id="cd-size"
    ),
    pytest.param(both_headers(INVALID_UTF8, 6, 8, b"\x00\x08"), "UTF-8", id="invalid-utf8-name"),
    pytest.param(corrupted(STORED, 100), "CRC", id="crc"),
    pytest.param(STORED[: len(STORED) // 2], ".npz", id="truncated"),
    pytest.param(STORED[:40] + STORED[80:], ".npz", id="hole"),
    pytest.param(
        corrupted(zipped(("embeddings.npy", ONE), method=zipfile.ZIP_DEFLATED), 60),
        ".npz",
        id="corrupt-deflate",
    ),
    pytest.param(patched(STORED, b"PK\x03\x04", 26, b"\x02\x00"), ".npz", id="name-mismatch"),
    pytest.param(repeated(17), "16", id="17-entries"),
    pytest.param(repeated(20_000, told=1), "directory", id="20000-entries-told-1"),
    pytest.param(repeated(20_000, told=10**6, zip64=True), "16", id="zip64-a-million"),
]


@pytest.mark.parametrize(("body", "words"), MALFORMED_ARCHIVES)
def test_malformed_archives(body: bytes, words: str) -> None:
    with pytest.raises(MalformedBody, match=words) as caught:
        npz.decode(body, ROOMY, MEMBERS, MEMBERS[:1])
    assert "b'" not in caught.value.detail
    assert "0x" not in caught.value.detail


def test_a_directory_of_many_entries_is_refused_before_it_is_read() -> None:
    body = repeated(100_000)
    tracemalloc.start()
    try:
        with pytest.raises(MalformedBody, match="16"):
            npz.decode(body, Limit(len(body), "PE_MAX_BODY_BYTES"), MEMBERS, MEMBERS[:1])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(body) + (1 << 20)


def test_a_bzip2_bomb_is_never_decompressed() -> None:
    """zipfile inflates bzip2 and lzma without an output bound: 200 bytes, 50 MB."""
    bomb = zipped(("embeddings.npy", bytes(10 << 20)), method=zipfile.ZIP_BZIP2)
    assert len(bomb) < 1000
    tracemalloc.start()
    try:
        with pytest.raises(MalformedBody, match="bzip2"):
            npz.decode(bomb, ROOMY, MEMBERS, MEMBERS[:1])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(("embeddings.npy", "embeddings.npy"), id="same-name"),
        pytest.param(("embeddings.npy", "embeddings"), id="with-and-without-.npy"),
        pytest.param(("position_ids.npy", "embeddings.npy", "position_ids.npy"), id="ids"),
    ],
)
def test_a_member_given_twice_is_refused(names: tuple[str, ...]) -> None:
    body = zipped(*[(name, ONE) for name in names])
    with pytest.raises(InvalidInput, match="more than once") as caught:
        npz.decode(body, ROOMY, MEMBERS, MEMBERS[:1])
    assert caught.value.name == names[-1].removesuffix(".npy")


def test_a_bad_member_is_named() -> None:
    with pytest.raises(InvalidInput, match="complex128") as caught:
        npz.decode(archive(embeddings=np.ones(3, np.complex128)), ROOMY, MEMBERS, MEMBERS[:1])
    assert caught.value.name == "embeddings"
    body = zipped(("embeddings.npy", ONE), ("position_ids.npy", b"not npy"))
    with pytest.raises(MalformedBody, match="position_ids"):
        npz.decode(body, ROOMY, MEMBERS, MEMBERS[:1])


def test_deflated_and_stored_members_are_read() -> None:
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        body = zipped(
            ("embeddings.npy", ONE), ("position_ids", npy_bytes(np.arange(2))), method=method
        )
        arrays = npz.decode(body, ROOMY, MEMBERS, MEMBERS[:1])
        assert arrays["embeddings"].shape == (2, 3)
        assert arrays["position_ids"].tolist() == [0, 1]


def test_the_unpacked_size_is_read_from_the_directory_alone() -> None:
    """What an archive holds decompressed, before it is decompressed: 64 KiB of deflated
    zeros declare their 64 MiB; what zipfile yields is at most that."""
    zeros = np.zeros((32768, 512), np.float32)
    body = bytearray(archive(True, embeddings=zeros, position_ids=np.arange(32768)))
    assert len(body) < 1 << 20
    expected = len(npy_bytes(zeros)) + len(npy_bytes(np.arange(32768)))
    tracemalloc.start()
    try:
        assert npz.unpacked_size(body) == expected
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # no copy of the body, no member decompressed
    commented = io.BytesIO()
    with zipfile.ZipFile(commented, "w") as written:
        written.writestr("embeddings.npy", npy_bytes(np.ones((4, 4), np.float32)))
        written.comment = b"x" * 60000
    assert npz.unpacked_size(b"\0" * 1000 + commented.getvalue()) == 128 + 64
    assert npz.unpacked_size(b"not an archive") == 0


def test_an_opened_archive_is_read_once_and_in_place() -> None:
    """The directory is read once (the archive :func:`npz.opened` gives is the one decoded:
    the body passed beside it is not read again), and the body is read in place: decoding
    holds its decompressed member, not a second copy of the body."""
    batch = np.arange(2 << 20, dtype=np.float32).reshape(1024, 2048)  # 8 MiB
    body = bytearray(zipped(("embeddings.npy", npy_bytes(batch))))
    archive = npz.opened(body)
    assert npz.unpacked_size(archive) == npz.unpacked_size(body) > batch.nbytes
    size = Limit(64 << 20, "PE_MAX_BODY_BYTES")
    tracemalloc.start()
    try:
        arrays = npz.decode(b"", size, MEMBERS, MEMBERS[:1], archive=archive)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.array_equal(arrays["embeddings"], batch)
    assert peak < 1.5 * batch.nbytes  # io.BytesIO(body) alone would copy 8 MiB more
    body += b"\0"  # closed: the body is the caller's again, free to grow


@pytest.mark.parametrize("comment", [b"", b"a comment"])
def test_an_empty_archive_lacks_its_members(comment: bytes) -> None:
    """An archive of no member is readable (its ZIP64 search seeks before its start, which
    reads as the start): it lacks the required member, a 422, not a damaged archive."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.comment = comment
    with pytest.raises(InvalidInput, match="required"):
        npz.decode(bytearray(buffer.getvalue()), ROOMY, MEMBERS, MEMBERS[:1])
