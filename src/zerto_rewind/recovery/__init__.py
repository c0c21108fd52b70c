"""Recovery: what protects a VM, which checkpoints exist, and how to rewind to one.

``protection`` (status, checkpoints, cadence as the ZVM shows it), ``plan``
(which recovery operations fit, read-only), ``failover`` (the failover test),
``live`` (live failover and restore, behind an exact confirmation),
``preview`` (what the guard would decide, without tagging) and ``sites`` (which
site's ZVM each of them speaks to when the estate has several).

May import: ``core``, ``config``, ``zvm`` and the base modules. Never a door or ``cli``.
"""
