"""ALiBi: the head slopes and the bias tensor, declared for the seam
(:mod:`service.web.families`) and served as tables are (formats by parameter or ``Accept``,
a strong ETag, ``immutable``, 304). Blocks are computed per request, not kept in the row
cache (each entry is one product; a repeat is answered by the replay layer)."""

from __future__ import annotations

from typing import Final

from service import handlers
from service.encodings import alibi
from service.schemas.alibi import BiasDocument, BiasQuery, SlopesDocument, SlopesQuery
from service.web import declared

PATH: Final = "/v1/biases/alibi"
SLOPES_PATH: Final = PATH + "/slopes"

SLOPES: Final = declared.Declared(
    family=alibi.SLOPES,
    path=SLOPES_PATH,
    query=SlopesQuery,
    key=SlopesQuery.key,
    block=lambda query, key: handlers.Block(key, 0, 1, 0, key.width, 1),
    describe=lambda query, key: query.describe(),
    check=SlopesQuery.check,
    document=SlopesDocument,
    operation_id="getAlibiSlopes",
    summary="The ALiBi slopes of num_heads heads (Press et al.'s get_slopes).",
    answer="The array, shape (num_heads).",
    shape="num_heads",
    tag="alibi",
    output="slopes",
)
BIAS: Final = declared.Declared(
    family=alibi.BIAS,
    path=PATH,
    query=BiasQuery,
    key=BiasQuery.key,
    block=lambda query, key: handlers.Block(
        key, query.start, query.row_stop, 0, key.width, query.max_len
    ),
    describe=lambda query, key: query.describe(),
    check=BiasQuery.check,
    document=BiasDocument,
    operation_id="getAlibiBias",
    summary="ALiBi attention biases (causal, BLOOM or symmetric form), or a block of rows.",
    answer="The array, shape (num_heads,rows,key_len).",
    shape="num_heads,rows,key_len",
    audit=True,  # by distance: each head's slope times it
    output="bias",
)
