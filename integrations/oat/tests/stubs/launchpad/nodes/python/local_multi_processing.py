"""Import-only stand-in for ``launchpad.nodes.python.local_multi_processing``."""

from _gem_oat_stand_in import unavailable

PythonProcess = unavailable(
    "launchpad.nodes.python.local_multi_processing.PythonProcess",
    "dm-launchpad has wheels only up to CPython 3.10",
)
