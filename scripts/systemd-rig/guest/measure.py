"""Append one turn (or memory edit) and time it: the unit starts, the item is decided (the
ledger), send starts, the item is sent, and it is in Honcho. One JSON line, seconds after the append.

    measure.py turn RUN SESSION N HONCHO | measure.py edit RUN N HONCHO

The units log nothing about an ordinary run (LogLevelMax=notice), so when they start is seen
from their cgroups appearing, polled while the item travels. SDRIG_SCOPE=system: the system
manager's units instead of the user's.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import boxhome  # beside this file
import honcho  # beside this file

LEDGER = boxhome.HOME / "memory" / "honcho.jsonl"
SCOPE = ["--user"] if os.environ.get("SDRIG_SCOPE", "user") == "user" else []


def post(url: str) -> dict:
    req = urllib.request.Request(url, data=b"{}", method="POST", headers=honcho.headers())
    with urllib.request.urlopen(req, timeout=3) as r:
        return json.load(r)


def epoch(ts: str) -> float:
    return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC).timestamp()


class Starts(threading.Thread):
    """When each unit starts, seen as its cgroup appearing: a stat every 5 ms costs next to
    nothing, where asking the manager that often (a systemctl process each time) took enough
    CPU to slow the Nice=10 jobs it was timing. The manager is asked only when no cgroup
    folder can be found."""

    ROOTS = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")
    SLICE = (
        "/system.slice" if not SCOPE else f"/user.slice/user-{os.getuid()}.slice/user@{os.getuid()}.service/app.slice"
    )

    def __init__(self, units: list[str]) -> None:
        super().__init__(daemon=True)
        self.units = units
        self.seen: dict[str, list[float]] = {u: [] for u in units}
        self.stop = threading.Event()
        self.slice = next((root + self.SLICE for root in self.ROOTS if os.path.isdir(root + self.SLICE)), None)

    def run(self) -> None:
        running = {u: False for u in self.units}
        while not self.stop.is_set():
            for unit in self.units:
                now = time.time()
                if self.slice is not None:
                    up = os.path.isdir(f"{self.slice}/{unit}")
                else:
                    up = subprocess.run(["systemctl", *SCOPE, "is-active", "-q", unit]).returncode == 0
                if up and not running[unit]:
                    self.seen[unit].append(now)
                running[unit] = up
            time.sleep(0.005 if self.slice is not None else 0.1)

    def after(self, unit: str, t: float) -> float | None:
        """The first start of unit at or after wall-clock time t, as seconds after t."""
        later = [x - t for x in self.seen[unit] if x >= t - 0.05]
        return round(later[0], 3) if later else None


def main() -> None:
    kind, run = sys.argv[1], sys.argv[2]
    if kind == "turn":
        session, n, base = sys.argv[3], int(sys.argv[4]), sys.argv[5]
        item, first = f"turn:{session}:{n}", "bxmem-decide.service"
        text = f"{run} question {n}"
        url = f"{base}/v3/workspaces/{run}-trusted/sessions/{session}/messages/list?size=100&reverse=true"
    else:
        n_edit, base = sys.argv[3], sys.argv[4]
        item, first = f"edit:j-{run}-{n_edit}", "bxmem-mirror.service"
        text = f"{run} fact {n_edit}"
        url = f"{base}/v3/workspaces/{run}-trusted/conclusions/list?size=100&reverse=true"
    starts = Starts([first, "bxmem-send.service"])
    starts.start()
    time.sleep(0.1)  # the manager's values before the append are known
    offset = LEDGER.stat().st_size if LEDGER.exists() else 0
    if kind == "turn":
        boxhome.append_log(session, boxhome.turn(n, text, f"{run} answer {n}"))
    else:
        boxhome.append_edit(
            {
                "id": f"j-{run}-{n_edit}",
                "ts": boxhome.ts(),
                "session": "s-clean",
                "op": "identity_add",
                "file": "user.md",
                "entry": text,
            }
        )
    t0 = time.time()
    res: dict = {"item": item}
    next_poll = 0.0
    while time.time() - t0 < 40 and not ("honcho" in res and "sent" in res):
        if LEDGER.exists() and LEDGER.stat().st_size > offset:
            with open(LEDGER) as f:
                f.seek(offset)
                for line in f.read().splitlines():
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue
                    if e.get("item") == item and e.get("ev") in ("decided", "sent") and e["ev"] not in res:
                        res[e["ev"]] = round(epoch(e["ts"]) - t0, 3)
        if "honcho" not in res and time.time() >= next_poll:
            next_poll = time.time() + 0.1
            try:
                if any(x["content"] == text for x in post(url)["items"]):
                    res["honcho"] = round(time.time() - t0, 3)
            except Exception as exc:
                res["honcho_errors"] = res.get("honcho_errors", 0) + 1
                res["honcho_error"] = str(exc)[:80]
        time.sleep(0.02)
    starts.stop.set()
    starts.join()
    res["unit_start"] = starts.after(first, t0)
    res["send_start"] = starts.after("bxmem-send.service", t0 + res["decided"]) if "decided" in res else None
    if res["send_start"] is not None:
        res["send_start"] = round(res["send_start"] + res["decided"], 3)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
