"""The project's test harness, public and documented: use it to test a guarded setup.

It is to zerto-rewind what ``ThreadedMotoServer`` is to moto (docs/testing.md):

* :class:`SimServer`: the ZVM simulator on a free port, over TLS, in a thread;
* :class:`Sandbox`: a simulator, a config wired to it and a state directory,
  with the hook run exactly as a host runs it (:meth:`Sandbox.run_hook`) and
  the simulator's control plane (:meth:`Sandbox.control`);
* :data:`FAST_CADENCES` and :func:`fast_sim_config`: journals that write every
  few seconds instead of every few minutes;
* :data:`THREE_ZVMS` and :func:`packaged_estate`: multi-site estates (one ZVM per
  site), which a Sandbox wires as ``zvms`` with a secret variable per site
  (:func:`secret_env`).

>>> with Sandbox(tmp) as box:  # doctest: +SKIP
...     run = box.run_hook("mcp__vsphere__list_vms", {})
...     assert run.decision == "none" and box.tag_requests() == 0

May import every layer below ``cli``: the doors (for the hook's launch line),
``config``, ``zvm``, ``sim`` and the base modules. Only ``cli`` (the demo)
imports it from inside the package.
"""

from __future__ import annotations

from ..sim import SimConfig, SimServer
from . import sandbox
from .sandbox import *  # noqa: F403  # re-exported: the names of sandbox.__all__

__all__ = ["SimConfig", "SimServer"]
__all__ += sandbox.__all__
