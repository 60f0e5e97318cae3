"""scripts/locked.py: the Makefile's parallel install steps never run two venv pip installs at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "locked.py"


def test_commands_under_one_lock_do_not_overlap(tmp_path):
    log = tmp_path / "log"
    body = ("import sys, time; f = open(sys.argv[1], 'a'); f.write('start\\n'); f.flush(); time.sleep(0.3); "
            "f.write('end\\n'); f.close()")
    procs = [subprocess.Popen([sys.executable, str(SCRIPT), str(tmp_path / "lock"), sys.executable, "-c", body,
                               str(log)]) for _ in range(3)]
    assert [p.wait(timeout=30) for p in procs] == [0, 0, 0]
    assert log.read_text().split() == ["start", "end"] * 3


def test_exit_code_of_the_command_is_returned(tmp_path):
    rc = subprocess.call([sys.executable, str(SCRIPT), str(tmp_path / "lock"), sys.executable, "-c",
                          "raise SystemExit(7)"])
    assert rc == 7
