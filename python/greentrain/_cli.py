"""The ``greentrain`` command of an installed wheel: runs the program the wheel carries
(``greentrain/_bin/greentrain``, built by scripts/wheel.sh) with the same arguments, as if it
had been started directly (its exit code, its signals, its standard streams)."""

from __future__ import annotations

import os
import pathlib
import stat
import sys
from typing import List, Optional

__all__ = ["main", "program_path"]


def program_path() -> pathlib.Path:
    """Where the wheel put the program."""
    return pathlib.Path(__file__).resolve().parent / "_bin" / "greentrain"


def main(argv: Optional[List[str]] = None) -> int:
    exe = program_path()
    if not exe.is_file():
        sys.stderr.write(
            f"greentrain: this install of the Python package has no program ({exe} is missing): "
            "`pip install .` builds the Python module only; install the wheel that "
            "`bash scripts/wheel.sh` makes (pip install --no-index dist/greentrain-*.whl) for "
            "the greentrain command\n")
        return 127
    if not os.access(exe, os.X_OK):  # an installer that dropped the executable bit
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    args = [str(exe)] + (sys.argv[1:] if argv is None else list(argv))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(str(exe), args)
    return 127  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
