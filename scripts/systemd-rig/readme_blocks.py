"""The README's own commands, as the rig runs them: the ```sh block after each
`<!-- systemd-rig: NAME -->` marker (runs on the host).

    readme_blocks.py README NAME       prints that block
    readme_blocks.py README            lists the names
"""

from __future__ import annotations

import re
import sys

MARKER = re.compile(r"^<!-- systemd-rig: ([a-z-]+) -->\n```sh\n(.*?)^```$", re.M | re.S)


def blocks(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, body in MARKER.findall(text):
        if name in found:
            raise SystemExit(f"the README marks two blocks {name!r}")
        found[name] = body
    return found


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        found = blocks(f.read())
    if len(sys.argv) == 2:
        print(" ".join(found))
    elif sys.argv[2] in found:
        sys.stdout.write(found[sys.argv[2]])
    else:
        raise SystemExit(f"the README has no block marked 'systemd-rig: {sys.argv[2]}'")
