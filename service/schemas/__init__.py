"""Wire models: the parameters of each family's requests (shared by the routers that take
them) and the JSON documents the service answers with."""
