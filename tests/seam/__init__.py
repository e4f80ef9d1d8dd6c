"""Stub families, one per shape the seam serves: each a new file that declares itself
(:class:`service.web.declared.Declared`) as its ``TABLE``: ``tests/test_family_seam.py``
serves every one it finds here."""
