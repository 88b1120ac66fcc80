"""Runs as ExecStart= of a copy of a bxmem unit: which sandbox settings took effect. One JSON line.

probe.py UNIT HONCHO_PORT
"""

from __future__ import annotations

import ctypes
import errno
import json
import mmap
import os
import resource
import socket
import sys
from collections.abc import Callable


def name(e: OSError) -> str:
    return errno.errorcode.get(e.errno, str(e)) if e.errno else str(e)


def child(fn: Callable[[], object]) -> str:
    """A filtered call may kill (SIGSYS): try it in a child."""
    pid = os.fork()
    if pid == 0:
        try:
            fn()
            os._exit(0)
        except OSError as e:
            os._exit(100 + (e.errno or 0) % 100)
        except Exception:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    code = os.WEXITSTATUS(status)
    return "ok" if code == 0 else ("error" if code == 99 else errno.errorcode.get(code - 100, str(code - 100)))


def unshare_user() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        raise OSError(ctypes.get_errno(), "unshare")


def probe(unit: str, honcho_port: int) -> dict:
    r: dict = {"unit": unit}
    with open("/proc/self/status") as f:
        status = dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)
    for key in ("Seccomp", "NoNewPrivs", "CapBnd", "CapEff"):
        r[key] = status.get(key, "").strip()
    with open("/proc/self/uid_map") as f:
        r["uid_map"] = " ".join(f.read().split())
    home = os.path.expanduser("~")
    for path in ("/usr", "/etc", "/tmp", home, home + "/.config", home + "/.local/share/boxmaker"):
        try:
            fn = os.path.join(path, ".sdrig-probe")
            open(fn, "w").close()
            os.unlink(fn)
            r["write " + path] = "rw"
        except OSError as e:
            r["write " + path] = name(e)
    r["tmp private"] = not os.path.exists("/tmp/.sdrig-marker")
    for fam in ("AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"):
        try:
            kind = socket.SOCK_RAW if fam == "AF_NETLINK" else socket.SOCK_DGRAM
            socket.socket(getattr(socket, fam), kind).close()
            r[fam] = "ok"
        except OSError as e:
            r[fam] = name(e)
    with open("/proc/self/net/dev") as f:
        r["net"] = sorted(line.split(":")[0].strip() for line in f.read().splitlines()[2:])
    try:
        mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC).close()
        r["mmap W+X"] = "ok"
    except OSError as e:
        r["mmap W+X"] = name(e)
    r["setpriority (@resources)"] = child(lambda: os.setpriority(os.PRIO_PROCESS, 0, 15))
    r["chown (@privileged)"] = child(lambda: os.chown(home + "/.local/share/boxmaker", os.getuid(), os.getgid()))
    r["unshare user ns (RestrictNamespaces)"] = child(unshare_user)
    r["RLIMIT_CORE"] = list(resource.getrlimit(resource.RLIMIT_CORE))
    r["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    pids = [d for d in os.listdir("/proc") if d.isdigit()]
    r["other uids' pids in /proc"] = sum(1 for d in pids if os.stat("/proc/" + d).st_uid != os.getuid())
    r["/proc/cpuinfo"] = os.path.exists("/proc/cpuinfo")
    r["/dev entries"] = len(os.listdir("/dev"))
    try:
        socket.create_connection(("127.0.0.1", honcho_port), timeout=2).close()
        r["tcp honcho"] = "ok"
    except OSError as e:
        r["tcp honcho"] = name(e)
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(home + "/.local/share/boxmaker/run/memory-broker/state.sock")
        s.sendall(b'{"SessionState":{"session":"s-probe"}}\n')
        r["brokerd"] = "answered" if b"SessionStateReply" in s.recv(200) else "bad reply"
    except OSError as e:
        r["brokerd"] = name(e)
    return r


if __name__ == "__main__":
    print("SDRIG-PROBE " + json.dumps(probe(sys.argv[1], int(sys.argv[2]))), flush=True)
