"""The encodings, in numpy only: one module per family, the registry that finds a family by
its key type, the exact angle arithmetic they share, and the apply kernels."""

from service.encodings import rotary as rotary  # registers the family
from service.encodings import sinusoidal as sinusoidal  # registers the family
