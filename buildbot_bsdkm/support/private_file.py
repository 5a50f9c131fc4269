"""Whether a file holding a credential is kept private, by the rule ssh applies to private keys.

ssh does not use a key file its owner's group or anyone else may access when the user running it
owns the file, nor one anyone at all may access whoever owns it: whoever can read it is whoever
the key says. Buildbot's ``SecretInAFile`` refuses the same "others" bits for the master's secrets.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def exposure(path: Path) -> str | None:
    """Why ``path`` is not private (``"readable by others (mode 0644)"``), or None when it is."""
    try:
        info = path.stat()
    except OSError:
        return None  # reading it says what is wrong
    mode = stat.S_IMODE(info.st_mode)
    if os.name != "posix":
        return None
    if mode & 0o007:
        return f"open to every user of this machine (mode {mode:04o})"
    if mode & 0o070 and info.st_uid == os.geteuid():
        return f"open to its group (mode {mode:04o})"
    return None
