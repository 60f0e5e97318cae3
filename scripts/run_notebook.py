#!/usr/bin/env python
"""`python scripts/run_notebook.py NOTEBOOK --out DIR` (`make notebook`): run a notebook top to bottom in a fresh
kernel (nbclient, the `notebook` extra) and write the executed copy, its tables and figures, to DIR/<name>.ipynb.

The kernel starts in DIR with this process's environment, so it imports this checkout's gear_repro. Exit codes: 0
ok, 1 a cell raised (the message names the cell), 2 nbclient missing or a bad argument.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="folder of the executed copy (created)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds one cell may take (default 600)")
    args = ap.parse_args(argv)
    try:
        import nbclient
        import nbformat
    except ImportError as e:
        print(f"error: {e.name} is not installed: `make install-notebook` installs the notebook extra", file=sys.stderr)
        return 2
    if not args.notebook.is_file():
        print(f"error: {args.notebook}: no such notebook", file=sys.stderr)
        return 2
    nb = nbformat.read(args.notebook, as_version=4)
    args.out.mkdir(parents=True, exist_ok=True)
    executed = args.out / args.notebook.name
    client = nbclient.NotebookClient(nb, timeout=args.timeout, kernel_name="python3",
                                     resources={"metadata": {"path": str(args.out)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        nbformat.write(nb, executed)  # the cells that ran, and the error, for reading
        last = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        print(f"error: {args.notebook}: a cell raised ({last}); the executed part is in {executed}", file=sys.stderr)
        return 1
    nbformat.write(nb, executed)
    print(f"executed {args.notebook} -> {executed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
