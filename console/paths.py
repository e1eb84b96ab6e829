"""Where episcope keeps its own files, by the platform's conventions.

platformdirs decides (on Linux the XDG base directories, ``XDG_CONFIG_HOME``,
``XDG_STATE_HOME`` and ``XDG_CACHE_HOME`` honoured): settings under the config directory,
recordings and exports under the state directory, unpacked archives under the cache. Nothing
episcope derives is ever written inside a workspace.
"""

from __future__ import annotations

from pathlib import Path

import platformdirs

APP_NAME = "episcope"


def config_file() -> Path:
    """The operator's settings (``[keymap]`` and the like); it may be absent."""
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)) / "config.toml"


def state_dir() -> Path:
    """Recordings of watched sessions and timeline exports."""
    return Path(platformdirs.user_state_dir(APP_NAME, appauthor=False))


def user_cache_dir(name: str) -> Path:
    """``<cache>/<name>``: files episcope derives and can derive again (unpacked archives)."""
    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)) / name
