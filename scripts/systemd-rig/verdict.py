"""Judges a probe's JSON against what the unit's settings promise (runs on the host).

verdict.py LABEL UNIT PROBE_JSON [judge|info]
"""

from __future__ import annotations

import json
import os
import sys


def want_for(unit: str, mode: str) -> dict:
    want: dict = {
        "Seccomp": "2",
        "NoNewPrivs": "1",
        "CapBnd": "0000000000000000",
        "write /usr": "EROFS",
        "write /etc": "EROFS",
        "write /home/kyle": "EROFS",
        "write /home/kyle/.config": "EROFS",
        "write /home/kyle/.local/share/boxmaker": "rw",
        "tmp private": True,
        "mmap W+X": ("EPERM", "EACCES"),  # EPERM: seccomp; EACCES: prctl(PR_SET_MDWE), systemd 257
        # SystemCallErrorNumber=EPERM: a filtered call fails, it does not kill the run
        "setpriority (@resources)": "EPERM",
        "chown (@privileged)": "EPERM",
        "RLIMIT_CORE": [0, 0],
        "nice": 10,
        "brokerd": "answered",
        "AF_NETLINK": "EAFNOSUPPORT",
    }
    if unit == "send":
        want.update({"AF_INET": "ok", "tcp honcho": "ok"})
    else:
        want.update({"AF_INET": "EAFNOSUPPORT", "AF_INET6": "EAFNOSUPPORT", "net": ["lo"]})
        if os.environ.get("SDRIG_NO_NETNS"):
            want.pop("net")  # a container artifact (see run.sh), not judged
    if mode == "info":
        want.pop("brokerd")  # the diagnosis runs while brokerd is still down
    return want


def main() -> None:
    label, unit, r = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else "judge"
    want = want_for(unit, mode)

    def same(got: object, v: object) -> bool:
        return got in v if isinstance(v, tuple) else got == v

    bad = {k: r.get(k) for k, v in want.items() if not same(r.get(k), v)}
    shown = {k: (" or ".join(v) if isinstance(v, tuple) else v) for k, v in want.items()}
    verdict = "FAIL " if mode == "judge" else "INFO "
    if bad:
        print(
            verdict
            + f"{label} sandbox probe ({unit}): not in effect: "
            + "; ".join(f"{k}={v!r} (want {shown[k]!r})" for k, v in bad.items())
        )
    else:
        verdict = "PASS " if mode == "judge" else "INFO "
        network = "TCP to Honcho open)" if unit == "send" else "AF_INET refused, only lo)"
        print(
            verdict + f"{label} sandbox probe ({unit}): {len(want)} checks in effect (read-only /usr /etc ~, "
            "rw Boxmaker home, private /tmp, @resources/@privileged calls fail with EPERM, W+X mmap refused, "
            "caps dropped, no core dumps, " + network
        )
    others, cpuinfo, userns = (
        r["other uids' pids in /proc"],
        r["/proc/cpuinfo"],
        r["unshare user ns (RestrictNamespaces)"],
    )
    print(
        f"INFO {label} sandbox probe ({unit}): uid_map {r['uid_map']!r}; ProtectProc=invisible: {others} other-uid "
        f"processes visible; ProcSubset=pid: /proc/cpuinfo {'visible' if cpuinfo else 'hidden'}; "
        f"unshare(CLONE_NEWUSER): {userns}"
    )


if __name__ == "__main__":
    main()
