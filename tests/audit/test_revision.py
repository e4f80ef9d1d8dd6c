"""An audit's answer is cached for a year under its ETag, which names ``AUDIT_REVISION``:
its numbers must not change while the revision stays. The JSON answers of a few small
audits (each family, a scaling, chosen paths and bands) are hashed here under the revision
they belong to; a change of any of them under the same revision fails, and says to bump it.

Floats are hashed at 9 significant digits: what the audits' arithmetic makes of a number
(a band's largest error, its mean) is stable to far more than that, while the last bits of
a mean may differ with numpy's summation order on another machine."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any, Final

import httpx
import orjson
import pytest

from service.encodings import kernels
from service.web.audits import AUDIT_REVISION
from tests.support import client_of

AUDITS: Final = {
    "rotary-llama3": "rotary?max_len=1024&head_dim=8&base=500000&scaling=llama3&factor=8"
    "&low_freq_factor=1&high_freq_factor=4&original_max_position_embeddings=512",
    "rotary-yarn": "rotary?max_len=3000&head_dim=8&scaling=yarn&factor=4"
    "&original_max_position_embeddings=512&paths=library,bf16-table,tf32-angles,device",
    # past the head every position of which is evaluated (2^21 entries: 4096 positions)
    "rotary-wide": "rotary?max_len=2100&head_dim=512&paths=library",
    "rotary-bands": "rotary?max_len=20000&head_dim=4&paths=device,fp16-positions&bands=100,3000",
    "sinusoidal": "sinusoidal?max_len=3000&d_model=16",
    "sinusoidal-fairseq": "sinusoidal?max_len=5000&d_model=8&preset=fairseq",
    "temperature": "temperature?max_len=10000",
    "alibi": "alibi?num_heads=8&max_len=5000",
}
# the hashes of each revision's answers; "1": as answered before 478e079, which changed
# rotary-wide's (its head counted in each pair's cos and sin once) and kept the revision
HASHES: Final = {
    "1": {
        "rotary-llama3": "578e6a08f6f113fb",
        "rotary-yarn": "31f79d570bee7c16",
        "rotary-wide": "9bc67df662d0e4b7",
        "rotary-bands": "fe272e7706b18e90",
        "sinusoidal": "652db0ffeae14d1e",
        "sinusoidal-fairseq": "aafa79f16a9fa5f0",
        "temperature": "19167f0bd9994433",
    },
    "2": {
        "rotary-llama3": "578e6a08f6f113fb",
        "rotary-yarn": "31f79d570bee7c16",
        "rotary-wide": "386cc036941f1330",
        "rotary-bands": "fe272e7706b18e90",
        "sinusoidal": "652db0ffeae14d1e",
        "sinusoidal-fairseq": "aafa79f16a9fa5f0",
        "temperature": "19167f0bd9994433",
        "alibi": "9d12b42cbe7b90b4",
    },
    # the answers name the library engine where their library path uses it (the numpy
    # engine's hashes: the torch engine's numbers differ by design)
    "3": {
        "rotary-llama3": "ad583fa8f0e956f0",
        "rotary-yarn": "ce122edc8025be7c",
        "rotary-wide": "513b7622c83ef35c",
        "rotary-bands": "60577af311292c81",
        "sinusoidal": "652db0ffeae14d1e",
        "sinusoidal-fairseq": "713a65a517a1064e",
        "temperature": "f99ed94bf86eabfa",
        "alibi": "9d12b42cbe7b90b4",
    },
}


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def rounded(value: Any) -> Any:
    """``value`` with every float written at 9 significant digits."""
    if isinstance(value, float):
        return f"{value:.9g}"
    if isinstance(value, dict):
        return {name: rounded(item) for name, item in value.items()}
    if isinstance(value, list):
        return [rounded(item) for item in value]
    return value


def digest(answer: httpx.Response) -> str:
    assert answer.status_code == 200, answer.text
    canonical = orjson.dumps(rounded(answer.json()), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()[:16]


def test_audit_answers_change_only_with_their_revision(http: httpx.Client) -> None:
    if kernels.engine() != "numpy":  # the app's, chosen when it was made
        pytest.skip("the hashes are the numpy engine's")
    found = {name: digest(http.get(f"/v1/audit/{query}")) for name, query in AUDITS.items()}
    kept = HASHES.get(AUDIT_REVISION, {})
    changed = sorted(name for name in AUDITS if name in kept and kept[name] != found[name])
    assert not changed, (
        f"the answers of {changed} changed under AUDIT_REVISION {AUDIT_REVISION!r}: caches "
        "keep the old ones for a year. Bump AUDIT_REVISION (service/web/audits.py) and add "
        f"these hashes under the new revision in HASHES: {found}"
    )
    missing = sorted(set(AUDITS) - set(kept))
    assert not missing, (
        f"HASHES has no hashes of {missing} under AUDIT_REVISION {AUDIT_REVISION!r}: add "
        f"these: {found}"
    )
