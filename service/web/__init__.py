"""The HTTP toolkit every router imports: dependencies, negotiation, conditional requests,
bodies, responses, problems and the OpenAPI declarations. Routers import from here (and
from the transport-free layers below) and never from each other."""
