#!/usr/bin/env python
"""`python scripts/locked.py LOCKFILE CMD...`: run CMD holding an exclusive lock on LOCKFILE.

The Makefile's install steps run in parallel (`make -j`); the ones that install into the venv go through this
so that two pip processes never write site-packages at the same time (downloads and the llama.cpp wheel build
do not write it and run unlocked).
"""

from __future__ import annotations

import fcntl
import subprocess
import sys


def main() -> int:
    lockfile, *cmd = sys.argv[1:]
    with open(lockfile, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
