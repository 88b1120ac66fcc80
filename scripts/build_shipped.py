"""The build step that puts the top-level data folders into the package.

`runbook/` (what `bxmem runbook NAME` prints) and `systemd/` (the unit templates
`bxmem units` fills in) live at the top of the checkout, where the owner's design
puts them and where they are edited; a wheel (pipx, uv, pip) carries a copy of each
under `bxmem/`. An editable install (./dev) and a plain checkout read them where
they are (start/locations.py's `shipped`). setuptools runs this as its `build_py`
(pyproject.toml, `[tool.setuptools] cmdclass`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parents[1]
#: Each top-level folder and the files of it that ship.
SHIPPED = {"runbook": "*.md", "systemd": "bxmem-*"}


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return  # the checkout is on the path: the folders are read where they are
        for folder, pattern in SHIPPED.items():
            target = Path(self.build_lib) / "bxmem" / folder
            target.mkdir(parents=True, exist_ok=True)
            files = sorted((ROOT / folder).glob(pattern))
            if not files:
                raise SystemExit(f"build: {folder}/ holds no {pattern}: the package would ship without it")
            for source in files:
                shutil.copyfile(source, target / source.name)
