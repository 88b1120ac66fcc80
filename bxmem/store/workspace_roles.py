"""The role each Honcho workspace was set up and written as, by the ledger: what was written cannot change
with the configuration. Saved beside the checkpoint so recall and ask read a small file, never the whole outbox.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from bxmem.formats.shapes import anything, dict_of, integer, list_of, maybe, record, string
from bxmem.store.ledger import Ledger, ReadResult
from bxmem.store.ledger_events import ATTEMPT, CREATED, DECIDED, SENT
from bxmem.store.ledger_shapes import MARK as LEDGER_MARK
from bxmem.store.state_json import load_json, write_json

SIDECAR = "workspace-roles.json"
SIDECAR_VERSION = 1
# Roles whose writes are text a session read from outside, or a note not
# trusted: a workspace holding any of them is not clean memory, whatever it is called now.
TAINTING = ("untrusted", "fleet")

Roles = dict[str, dict]
# What `apply` builds, as the outbox checkpoint and the copy beside it keep it.
SHAPE = dict_of(record({"set_up": list_of(maybe(string)), "written": dict_of(string)}))
SIDECAR_SHAPE = record(
    {"version": anything, "ino": maybe(integer(0)), "offset": integer(0), "roles": SHAPE}, {"mark": maybe(LEDGER_MARK)}
)


def _entry(roles: Roles, ws: str) -> dict:
    return roles.setdefault(ws, {"set_up": [], "written": {}})


def apply(roles: Roles, ev: dict, role_of: Callable[[str], object]) -> None:
    """Fold one ledger event. `role_of(item)` is the role its decision recorded,
    for lines written before attempts and sends carried one."""
    kind, ws = ev.get("ev"), ev.get("ws")
    if not isinstance(ws, str):
        return
    if kind == CREATED and ev.get("what") == "workspace":
        role = ev.get("role") if isinstance(ev.get("role"), str) else None
        entry = _entry(roles, ws)
        if role not in entry["set_up"]:
            entry["set_up"].append(role)
    elif kind in (ATTEMPT, SENT):
        items = ev.get("items") if kind == ATTEMPT else [ev.get("item")]
        for item in items if isinstance(items, list) else []:
            role = ev.get("role") or role_of(item)
            if isinstance(role, str) and isinstance(item, str):
                _entry(roles, ws)["written"].setdefault(role, item)


def written(roles: Roles, ws: str) -> dict[str, str]:
    entry = roles.get(ws)
    return entry["written"] if entry else {}


def other_role(roles: Roles, ws: str, role: str) -> tuple[str, str] | None:
    for other, item in sorted(written(roles, ws).items()):
        if other != role:
            return other, item
    return None


def tainted_by(roles: Roles, ws: str) -> tuple[str, str] | None:
    for role in TAINTING:
        item = written(roles, ws).get(role)
        if item is not None:
            return role, item
    return None


def read_as_tainted(roles: Roles | None, ws: str) -> str | None:
    """Why a workspace the configuration has recall and ask read as trusted must be read as memory-tainted, or None:
    this agent wrote untrusted turns or fleet notes there, or the ledger that would say could not be read (`roles`
    None: what bxmem cannot read counts against trust)."""
    if roles is None:
        return f"this agent's ledger could not be read to tell what it wrote to {ws}: read as memory-tainted"
    found = tainted_by(roles, ws)
    if found is None:
        return None
    return f"this agent wrote {ws} as its {found[0]} workspace (first {found[1]}): read as memory-tainted"


def tainting_notes(state_dir: Path, ledger_path: Path, workspaces: Iterable[str]) -> dict[str, str]:
    roles = read(state_dir, ledger_path)
    return {ws: why for ws in workspaces if (why := read_as_tainted(roles, ws)) is not None}


def set_up_for(roles: Roles, ws: str, role: str) -> bool:
    """Whether `ws` has had its configuration applied for `role`. A line from before
    roles were recorded (None) counts for no role: the workspace is set up again."""
    entry = roles.get(ws)
    return entry is not None and role in entry["set_up"]


# --- the copy beside the outbox checkpoint, for the read path ------------------------------


def save(state_dir: Path, roles: Roles, ino: int | None, offset: int, mark: dict | None = None) -> None:
    write_json(
        state_dir / SIDECAR, {"version": SIDECAR_VERSION, "ino": ino, "offset": offset, "roles": roles, "mark": mark}
    )


def read(state_dir: Path, ledger_path: Path) -> Roles | None:
    """What the ledger says now: the saved copy caught up with the ledger's tail, or the whole ledger folded when the
    copy is unusable or the ledger was rewritten since, keeping what the copy knew (what was written to Honcho did
    not go back with the ledger). None when the ledger cannot be read."""
    ledger = Ledger(ledger_path)
    try:
        st = ledger_path.stat()
    except FileNotFoundError:
        return {}  # nothing was ever written anywhere
    except OSError:
        return None
    saved, why = load_json(state_dir / SIDECAR, SIDECAR_SHAPE)
    if why is not None:  # the read path says it quietly: the next send writes the copy again
        from bxmem.log import log  # deferred: lean (recall reads this copy and sets up no logging)

        log.info(f"{state_dir / SIDECAR}: {why}; the ledger is folded instead")
    ours = saved is not None and saved["version"] == SIDECAR_VERSION
    try:
        if (
            ours
            and saved is not None
            and saved["ino"] == st.st_ino
            and ledger.changed(saved["offset"], saved.get("mark")) is None
        ):
            caught_up = _fold(ledger, saved["offset"], _valid(saved["roles"]), strict=True)
            if caught_up is not None:
                return caught_up
        folded = _fold(ledger, 0, {}, strict=False)
    except OSError:
        return None
    assert folded is not None  # not strict: every line is resolved
    if ours and saved is not None:
        merge(folded, _valid(saved["roles"]))
    return folded


def merge(roles: Roles, more: Roles) -> None:
    """Add to `roles` what `more` says was set up or written: what is in Honcho stays there."""
    for ws, entry in more.items():
        mine = _entry(roles, ws)
        mine["set_up"] += [role for role in entry["set_up"] if role not in mine["set_up"]]
        for role, first in entry["written"].items():
            mine["written"].setdefault(role, first)


def _valid(raw: dict) -> Roles:
    """The saved copy's entries that have the shape `apply` gives them (a damaged copy loses only itself)."""
    roles: Roles = {}
    for ws, entry in raw.items():
        if (
            isinstance(ws, str)
            and isinstance(entry, dict)
            and isinstance(entry.get("set_up"), list)
            and isinstance(entry.get("written"), dict)
        ):
            roles[ws] = {"set_up": list(entry["set_up"]), "written": dict(entry["written"])}
    return roles


class _Unresolved(Exception):
    """A tail line written without a role for an item decided before the tail."""


def _fold(ledger: Ledger, offset: int, roles: Roles, *, strict: bool) -> Roles | None:
    """Fold the ledger from `offset` into `roles`. The decisions' roles are learnt on
    the way; `strict` (a tail): a line whose role is neither on it nor learnt here
    gives None, and the caller folds from the start instead."""
    decided: dict[str, object] = {}

    def role_of(item: str) -> object:
        if item in decided:
            return decided[item]
        if strict:
            raise _Unresolved(item)
        return None

    try:
        for ev in ledger.iter_from(offset, ReadResult()):
            if ev.get("ev") == DECIDED and isinstance(ev.get("item"), str) and ev.get("ws"):
                decided.setdefault(ev["item"], ev.get("role"))  # the first decision stands
            else:
                apply(roles, ev, role_of)
    except _Unresolved:
        return None
    return roles
