"""Import-only stand-in for dm-launchpad (wheels only up to CPython 3.10).

oat imports ``launchpad`` at module level (``oat.interface``, ``oat.learners.base``,
``oat.utils.ipc``); the tests never build or launch a program. Everything here raises
when used. Listed in integrations/oat/STUBS.md.
"""

from _gem_oat_stand_in import unavailable, unavailable_function

_WHY = "dm-launchpad has wheels only up to CPython 3.10"
Program = unavailable("launchpad.Program", _WHY)
CourierNode = unavailable("launchpad.CourierNode", _WHY)
PyClassNode = unavailable("launchpad.PyClassNode", _WHY)
PyNode = unavailable("launchpad.PyNode", _WHY)
launch = unavailable_function("launchpad.launch", _WHY)
stop = unavailable_function("launchpad.stop", _WHY)
