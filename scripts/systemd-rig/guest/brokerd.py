"""bxmem's own stub brokerd (bxmem.demo.brokerd) on the home's socket, until SIGTERM."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from bxmem.demo.brokerd import StubBrokerd

home = Path(os.environ.get("BOXMAKER_HOME", Path.home() / ".local/share/boxmaker"))
stub = StubBrokerd(home / "run/memory-broker/state.sock", {"s-fetched": ("public", True)}).start()
print(f"stub brokerd on {stub.sock_path}", flush=True)
signal.sigwait({signal.SIGTERM, signal.SIGINT})
stub.stop()
