"""Settings: where the config lives, its types, and the parser that validates it.

``settings`` holds the types and the environment lookups, ``parser`` turns raw
JSON into settings (driven by the key tables of ``schema``), ``loader`` reads the
file. Everything here stays import-light (no ``json``, ``re`` or ``typing`` at run
time): the hook loads it on every call.

May import only the base modules (``errors``, ``_fastjson``).
"""

from __future__ import annotations

from .loader import load_config, load_settings
from .settings import (
    CatalogSettings,
    GuardSettings,
    Settings,
    ToolSpec,
    VmMap,
    VmPath,
    ZvmSettings,
    config_path,
    default_log_path,
    home_dir,
    validate_patterns,
)

__all__ = [
    "CatalogSettings",
    "GuardSettings",
    "Settings",
    "ToolSpec",
    "VmMap",
    "VmPath",
    "ZvmSettings",
    "config_path",
    "default_log_path",
    "home_dir",
    "load_config",
    "load_settings",
    "validate_patterns",
]
