"""Settings: where the config lives, its types, and the parser that validates it.

``settings`` holds the types and the environment lookups, ``parser`` turns raw
JSON into settings (driven by the key tables of ``schema``), ``loader`` reads the
file. Everything here stays import-light (no ``json``, ``re`` or ``typing`` at run
time): the hook loads it on every call.

May import only the base modules (``errors``, ``_fastjson``).
"""

from __future__ import annotations

from . import settings
from .loader import load_config, load_settings
from .settings import *  # noqa: F403  # re-exported: the names of settings.__all__

__all__ = ["load_config", "load_settings"]
__all__ += settings.__all__
