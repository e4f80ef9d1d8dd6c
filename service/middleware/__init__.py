"""The ASGI layers in front of the framework, from the outside in: telemetry, CORS,
replay, ``HEAD`` as ``GET``."""
