"""Running the real ``roofwatch`` console script in a subprocess with a chosen environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOFWATCH = Path(sys.executable).parent / "roofwatch"


def roofwatch(args: list[str], env: dict[str, str], check: bool = True,
              timeout: float = 600) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ROOFWATCH_")}
    # A first run calibrates its device (seconds, a GiB copy); tests that want roofs ask for it.
    full_env["ROOFWATCH_CALIBRATE"] = "0"
    full_env.update(env)
    full_env["COLUMNS"] = "200"  # wide tables, so assertions see whole words
    done = subprocess.run([str(ROOFWATCH), *args], env=full_env, capture_output=True, text=True,
                          timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"roofwatch {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done
