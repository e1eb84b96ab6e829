"""episcope: operator console and tool kit for GPU-kernel optimization episodes.

Importing this package must stay cheap and Textual-free: the headless verbs and every
tool that runs on the GPU machine import it.
"""

__version__ = "0.1.0"
