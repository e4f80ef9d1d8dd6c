"""The HTTP toolkit every router imports: dependencies, negotiation, conditional requests,
bodies, responses, limits, problems and the OpenAPI declarations. Routers import from here
and never from each other."""
