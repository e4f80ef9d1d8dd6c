"""The ASGI layers in front of the framework, from the outside in: CORS, replay, telemetry,
``HEAD`` as ``GET``."""
