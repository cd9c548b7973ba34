"""Whether a Python interpreter a model named may run without anyone's consent, judged on the
host where it lives (run by the host's configured interpreter; standard library only).

    python3 - PYTHON ROOTS_JSON    ->    {"trusted": bool, "path": "...", "why": "..."}

Trusted means Sleuth could have found it itself: its name is python*, and neither the file,
the folder it is run from, nor that folder's parent, as written or resolved (where a venv's
pyvenv.cfg and site-packages are, whose .pth files run at start-up) lies under the roots (the model
folders, where a checkpoint cloned from a hub may carry an executable `python`); the file,
every folder above it and above the venv, and any pyvenv.cfg are owned by root or this user
and writable by no one else (a sticky folder above the venv, such as /tmp, excepted).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys

NAME = re.compile(r"python[0-9.]*")


def under(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def unsafe(path: str, me: int, sticky_ok: bool = False) -> str | None:
    """Why `path` could hold someone else's code, or None. A folder above the venv may be
    writable by all when sticky (/tmp): no one else can rename or remove what lies in it."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"cannot stat {path}: {exc.strerror}"
    if st.st_uid not in (0, me):
        return f"{path} is owned by uid {st.st_uid}, neither root nor this user"
    sticky = sticky_ok and stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky:
        return f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def folders(path: str) -> list[str]:
    """`path`'s folders from / down to its own."""
    parts = []
    while True:
        parts.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            return list(reversed(parts))
        path = parent


def judge(given: str, roots: list[str]) -> tuple[str | None, str | None]:
    found = given if "/" in given else shutil.which(given)
    if not found:
        return None, f"{given} is not on this host's PATH"
    path = os.path.abspath(found)
    real = os.path.realpath(path)
    home = os.path.realpath(os.path.dirname(path))
    venv = os.path.dirname(home)
    # Python finds pyvenv.cfg, and so its prefix and site-packages, beside or above the path
    # as given, its folders taken as written: `models/x/bin` linked to a real venv's bin
    # still reads `models/x/pyvenv.cfg`.
    above = os.path.realpath(os.path.dirname(os.path.dirname(path)))
    if not NAME.fullmatch(os.path.basename(path)) or not NAME.fullmatch(os.path.basename(real)):
        return real, f"{path} ({real}) is not named like a Python interpreter"
    if not os.path.isfile(real) or not os.access(real, os.X_OK):
        return real, f"{real} is not an executable file"
    for where in (real, home, venv, above):
        if under(where, roots):
            return real, f"{where} lies under the host's roots (the model folders)"
    me = os.getuid()
    near = {real, home, venv, above}
    cfgs = (home + "/pyvenv.cfg", venv + "/pyvenv.cfg", above + "/pyvenv.cfg")
    near |= {cfg for cfg in cfgs if os.path.exists(cfg)}
    up = {*folders(os.path.dirname(real)), *folders(venv), *folders(above)} - near
    for each, sticky_ok in [
        *((p, False) for p in sorted(near)),
        *((p, True) for p in sorted(up)),
    ]:
        why = unsafe(each, me, sticky_ok)
        if why:
            return real, why
    return real, None


def main() -> None:
    given, roots = sys.argv[1], [os.path.realpath(r) for r in json.loads(sys.argv[2])]
    real, why = judge(given, roots)
    print(json.dumps({"trusted": why is None, "path": real, "why": why or ""}))


if __name__ == "__main__":
    main()
