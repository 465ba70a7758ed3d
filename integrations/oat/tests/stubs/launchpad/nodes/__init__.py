"""Import-only stand-in (see ``launchpad/__init__.py``)."""
