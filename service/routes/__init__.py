"""Thin routers, one per resource, each importing the web toolkit and never another router."""

from fastapi import APIRouter

from service.routes import alibi, docs, explorer, inference, ops, pictures, rotary, sinusoidal

ROUTERS: list[APIRouter] = [
    sinusoidal.router,
    rotary.router,
    alibi.router,
    pictures.router,
    ops.router,
    inference.router,
    explorer.router,
    docs.router,
]
