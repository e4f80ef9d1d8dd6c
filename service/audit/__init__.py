"""The precision audit: how far the tables a model sees, computed along each of the paths
that libraries, devices and dtypes take, are from the exact table, by position band
(:mod:`.paths`: the paths; :mod:`.envelope`: what a GPU's math library may produce;
:mod:`.bands`: the positions evaluated and the statistics)."""
