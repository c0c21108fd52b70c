"""A local ZVM 10.x simulator: real HTTPS, Keycloak tokens, journals, tasks, faults.

See docs/simulator.md. ``SimServer(SimConfig(...)).start()`` runs it in-process;
``python -m zerto_rewind.sim`` (or ``zerto-rewind sim``) runs it as a process.

A stand-alone service: it imports only its own modules, never the client or the guard.
"""

from zerto_rewind.sim.app import SimServer, main
from zerto_rewind.sim.config import SimConfig
from zerto_rewind.sim.errors import SimError
from zerto_rewind.sim.estate import EstateError

__all__ = ["EstateError", "SimConfig", "SimError", "SimServer", "main"]
