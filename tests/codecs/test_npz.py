"""``.npz`` archives: members named and bounded once decompressed."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

from service.codecs import npz
from service.errors import BodyTooLarge, InvalidInput, Limit, MalformedBody

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
