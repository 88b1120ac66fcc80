"""What the run's three workspaces hold in Honcho: messages per session, conclusions. JSON.

honcho/client.py BASE_URL RUN
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request


def headers() -> dict:
    """A server with auth on: the admin JWT the rig was given (SDRIG_HONCHO_TOKEN, or the file the rig
    leaves for the guest's scripts)."""
    token = os.environ.get("SDRIG_HONCHO_TOKEN", "")
    if not token and os.path.exists(TOKEN):
        with open(TOKEN) as f:
            token = f.read().strip()
    return {"content-type": "application/json", **({"authorization": f"Bearer {token}"} if token else {})}


TOKEN = "/opt/sdrig/honcho.token"


def post(base: str, path: str) -> dict:
    req = urllib.request.Request(base + path, data=b"{}", method="POST", headers=headers())
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.load(r)


def content(base: str, run: str) -> dict:
    out: dict = {}
    for role in ("trusted", "untrusted", "fleet"):
        ws = f"{run}-{role}"
        try:
            sessions = [s["id"] for s in post(base, f"/v3/workspaces/{ws}/sessions/list?size=100")["items"]]
            messages = {
                s: [
                    [m["peer_id"], m["content"]]
                    for m in post(base, f"/v3/workspaces/{ws}/sessions/{s}/messages/list?size=100")["items"]
                ]
                for s in sessions
            }
            conclusions = [c["content"] for c in post(base, f"/v3/workspaces/{ws}/conclusions/list?size=100")["items"]]
            out[role] = {"messages": messages, "conclusions": conclusions}
        except Exception as exc:
            out[role] = {"error": str(exc)[:100]}
    return out


if __name__ == "__main__":
    print(json.dumps(content(sys.argv[1], sys.argv[2])))
