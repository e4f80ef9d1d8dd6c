"""Thin routers, one per resource, each importing the web toolkit and never another router;
the families, each declared once and routed by the seam (:mod:`service.web.families`)."""

from typing import Any

from fastapi import APIRouter

from service.routes import (
    alibi,
    docs,
    explorer,
    mrope,
    ops,
    pictures,
    rope_nd,
    rotary,
    sincos,
    sinusoidal,
    temperature,
    timestep,
    vision_interpolation,
    vision_rotary,
)
from service.web.declared import Declared
from service.web.families import router

# one line a family: its routes are built from its declaration
FAMILIES: tuple[Declared[Any, Any], ...] = (
    sinusoidal.TABLE,
    rotary.TABLE,
    alibi.SLOPES,
    alibi.BIAS,
    temperature.TABLE,
    timestep.TABLE,
    sincos.TABLE_2D,
    sincos.TABLE_3D,
    rope_nd.TABLE,
    vision_rotary.TABLE,
)
ROUTERS: list[APIRouter] = [
    *map(router, FAMILIES),
    sinusoidal.router,
    rotary.router,
    rope_nd.router,
    vision_rotary.router,
    mrope.router,
    vision_interpolation.router,
    pictures.router,
    ops.router,
    explorer.router,
    docs.router,
]
