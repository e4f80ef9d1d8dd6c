"""Stub families, one per shape the seam serves: each a new file that declares itself
(:class:`service.web.declared.Declared`), registered by one line in
``tests/test_family_seam.py``."""
