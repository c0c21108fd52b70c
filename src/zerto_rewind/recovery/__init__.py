"""Recovery: what protects a VM, which checkpoints exist, and how to rewind to one.

``protection`` (status, checkpoints, cadence as the ZVM shows it), ``plan``
(which recovery operations fit, read-only), ``failover`` (the failover test),
``live`` (live failover and restore, behind an exact confirmation) and
``preview`` (what the guard would decide, without tagging).

May import: ``core``, ``config``, ``zvm`` and the base modules. Never a door or ``cli``.
"""
