"""The owner's artifact commands (list, verify, export, rm; none is a model tool) and what sync shows.
`rm` undoes a record: a card already in Honcho gets a retraction beside it (Honcho cannot delete a message).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from bxmem.commands.artifact import find_cards, reconcile, refresh_catalog, store_of
from bxmem.config.loader import Config
from bxmem.errors import ExitCode, NotFound, Refused, cite_runbook
from bxmem.formats.timestamps import format_time
from bxmem.store import artifact_catalog as catalog
from bxmem.store.artifact_cards import Cards
from bxmem.store.artifacts import Store
from bxmem.store.ledger import Ledger
from bxmem.store.ledger_events import DecidedCard, decided_card
from bxmem.store.outbox import KIND, Outbox
from bxmem.trust import printed_fields
from bxmem.trust.artifact_rules import retraction_item

TITLE_CHARS = 120  # of a card's title in the owner's lines (stored text: printed_fields.line)


LIST_SCHEMA, VERIFY_SCHEMA = "bxmem.artifact-list/1", "bxmem.artifact-verify/1"  # bxmem/schemas/artifact-*.schema.json
EXPORT_SCHEMA, RM_SCHEMA = "bxmem.artifact-export/1", "bxmem.artifact-rm/1"


def index_state(box: Outbox | None, entry: dict) -> str:
    """Where a card's outbox item stands, as the ledger says: local-only, pending,
    in-doubt, failed, sent, or not-sent (cancelled by `artifact rm`, or dropped)."""
    if not entry["ws"]:
        return "local-only"
    if entry["state"] == "pending" or box is None:
        return "pending" if entry["state"] == "pending" else "queued"
    item = entry["item"]
    if item in box.pending:
        return "in-doubt" if item in box.attempts else "pending"
    if item in box.failed:
        return "failed"
    return "sent" if f"{item}#0" in box.fleet else "not-sent"


def _outbox(config: Config) -> Outbox | None:
    ledger = Ledger(config.paths.ledger)
    if ledger.size() == 0:
        return None
    return Outbox.load(config.paths.ensure_state_dir(), ledger)


def _card_json(card: dict, box: Outbox | None, store: Store) -> dict:
    art = card["artifact"]
    return {
        "experiment_id": card["experiment_id"],
        "artifact_id": art["id"],
        "bytes": art["bytes"],
        "media_type": printed_fields.line(art["media_type"], 100),
        "title": printed_fields.line(card["title"], TITLE_CHARS),
        "tags": [printed_fields.line(t, 80) for t in card["tags"]],
        "session": printed_fields.token(card["session"]),
        "source_version": printed_fields.line(card["identity"]["source_version"], 200),
        "label": card["label"],
        "created_at": printed_fields.date(card["created_at"]),
        "updated_at": printed_fields.date(card["updated_at"]),
        "object": "present" if store.has_object(art["id"], art["bytes"]) else "missing or of another size",
        "index": [
            {
                "item": printed_fields.item(e["item"]),
                "state": index_state(box, e),
                "workspace": printed_fields.token(e["ws"]),
                "reason": printed_fields.line(e["reason"], 200),
            }
            for e in card["remote"]
        ],
    }


@dataclass
class Listing:
    cards: list[dict] = field(default_factory=list)
    unusable: list[str] = field(default_factory=list)
    usage: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"schema": LIST_SCHEMA, "cards": self.cards, "unusable": self.unusable, "usage": self.usage}

    def lines(self) -> list[str]:
        u = self.usage
        bounds = (
            f" (of {u['max_total_bytes']:,} bytes and {u['max_cards']:,} cards)"
            if u["max_total_bytes"]
            else " (artifact memory is off: no [artifacts] in bxmem.toml)"
        )
        out = [f"{len(self.cards)} card(s), {u['objects']} object(s), {u['bytes']:,} bytes{bounds}"]
        for c in self.cards:
            index = (
                "; ".join(
                    f"{i['state']}" + (f" in {i['workspace']}" if i["workspace"] else f" ({i['reason']})")
                    for i in c["index"]
                )
                or "-"
            )
            tag = "memory-tainted" if c["label"]["untrusted"] else "memory"
            out.append(
                f"{c['experiment_id']} {c['artifact_id']} {c['bytes']:,} bytes {c['media_type']}: {c['title']!r}"
                f" (session {c['session']}, {tag}, {c['label']['class']}, {c['created_at']}; bytes {c['object']}); "
                f"Honcho: {index}"
            )
        out += [f"unusable: {why}" for why in self.unusable]
        return out

    @property
    def exit_code(self) -> int:
        return ExitCode.OK


def usage(config: Config, store: Store, cards: Cards) -> dict:
    objects, size = store.usage()
    limits = config.artifacts
    return {
        "objects": objects,
        "bytes": size,
        "cards": cards.count(),
        "max_total_bytes": limits.max_total_bytes if limits else None,
        "max_cards": limits.max_cards if limits else None,
    }


def list_cards(config: Config) -> Listing:
    store, cards = store_of(config)
    result = Listing()
    if store.is_set_up():
        warnings: list[str] = []
        with store.lock():
            reconcile(config, store, cards, warnings)
        box = _outbox(config)
        for _name, card, why in cards.all():
            if card is None:
                result.unusable.append(printed_fields.line(why, 300))
            else:
                result.cards.append(_card_json(card, box, store))
    result.usage = usage(config, store, cards)
    return result


@dataclass
class Verified:
    checked: int = 0
    failures: list[dict] = field(default_factory=list)  # {"artifact", "experiments", "problem"}
    unusable: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)  # objects no card names
    recovered: list[str] = field(default_factory=list)  # temporary files of writers gone, removed
    queued: int = 0  # cards a cut-short record left pending, queued now
    pruned: int = 0  # projections of removed cards, no longer needed by the outbox

    def as_json(self) -> dict:
        return {
            "schema": VERIFY_SCHEMA,
            "checked": self.checked,
            "failures": self.failures,
            "unusable": self.unusable,
            "orphans": self.orphans,
            "recovered_temps": len(self.recovered),
            "queued": self.queued,
            "pruned_projections": self.pruned,
        }

    def lines(self) -> list[str]:
        out = [f"checked {self.checked} object(s): {len(self.failures)} failed their integrity check"]
        out += [
            f"failed: {f['artifact']} ({', '.join(f['experiments'])}): {f['problem']}"
            " (see: bxmem runbook artifact-integrity-failed)"
            for f in self.failures
        ]
        out += [f"unusable: {why} (see: bxmem runbook artifact-integrity-failed)" for why in self.unusable]
        out += [
            f"orphan: {a}: no card names it (a record cut short; bxmem artifact rm {a} removes it)"
            for a in self.orphans
        ]
        if self.recovered:
            out.append(f"removed {len(self.recovered)} temporary file(s) of records that did not finish")
        if self.queued:
            out.append(f"queued {self.queued} card(s) a record cut short had left out of the outbox")
        if self.pruned:
            out.append(f"removed {self.pruned} projection(s) of removed cards")
        return out

    @property
    def exit_code(self) -> int:
        return ExitCode.INTEGRITY if self.failures or self.unusable else ExitCode.OK


def verify(config: Config, ids: list[str] | None = None) -> Verified:
    store, cards = store_of(config)
    result = Verified()
    if not store.is_set_up():
        if ids:
            raise NotFound(f"{ids[0]} is not on this host: there is no artifact store")
        return result
    warnings: list[str] = []
    with store.lock():
        result.recovered = store.recover_temps()
        result.queued = reconcile(config, store, cards, warnings)
        refresh_catalog(config, cards, None, {})  # verify rewrites it whole
    named: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    chosen = [c for i in ids for c in _found(cards, i)] if ids else None
    for name, card, why in [(c["experiment_id"], c, None) for c in chosen] if chosen is not None else cards.all():
        if card is None:
            result.unusable.append(printed_fields.line(why, 300))
            continue
        named.setdefault(card["artifact"]["id"], []).append(name)
        sizes[card["artifact"]["id"]] = card["artifact"]["bytes"]
    for artifact, experiments in named.items():
        result.checked += 1
        problem = store.check_object(artifact, sizes[artifact])
        if problem is not None:
            result.failures.append({"artifact": artifact, "experiments": experiments, "problem": problem})
    if not ids:
        result.orphans = [a for a in store.objects() if a not in named]
        result.pruned = _prune(config, cards)
    return result


def _found(cards: Cards, ident: str) -> list[dict]:
    found = find_cards(cards, ident)
    if not found:
        raise NotFound(f"{ident} is not on this host")
    return found


def _prune(config: Config, cards: Cards) -> int:
    """Projections of removed cards whose item the outbox no longer needs (one is kept
    while its item is in doubt: the lookup compares the text)."""
    box = _outbox(config)
    live = set(cards.names())
    doubt = list(box.attempts) if box else []
    pruned = 0
    for experiment, rev in cards.projections():
        if experiment not in live and not any(k.startswith(f"card:{experiment}:{rev}") for k in doubt):
            cards.remove_projection(experiment, rev)
            pruned += 1
    return pruned


@dataclass
class Exported:
    artifact: str
    to: str
    size: int

    def as_json(self) -> dict:
        return {"schema": EXPORT_SCHEMA, "artifact_id": self.artifact, "to": self.to, "bytes": self.size}

    def lines(self) -> list[str]:
        return [f"exported {self.artifact} ({self.size:,} bytes, verified) to {self.to}"]

    @property
    def exit_code(self) -> int:
        return ExitCode.OK


def export(config: Config, ident: str, to: str) -> Exported:
    store, cards = store_of(config)
    found = _found(cards, ident) if store.is_set_up() else []
    if not found:
        raise NotFound(f"{ident} is not on this host")
    art = found[0]["artifact"]
    store.export(art["id"], art["bytes"], to)
    return Exported(art["id"], to, art["bytes"])


@dataclass
class Removed:
    dry_run: bool
    removed: list[dict] = field(default_factory=list)  # {"experiment", "artifact", "bytes_removed", "honcho": [...]}

    def as_json(self) -> dict:
        return {"schema": RM_SCHEMA, "dry_run": self.dry_run, "removed": self.removed}

    def lines(self) -> list[str]:
        out = []
        for r in self.removed:
            verb = "would remove" if self.dry_run else "removed"
            what = "its card and its bytes" if r["bytes_removed"] else "its card (another card names its bytes: kept)"
            out.append(f"{verb} {r['experiment']} ({r['artifact']}): {what}")
            out += [f"  Honcho: {effect}" for effect in r["honcho"]]
        if self.dry_run:
            out.append("(dry run, nothing written)")
        return out

    @property
    def exit_code(self) -> int:
        return ExitCode.OK


def _effect(box: Outbox | None, entry: dict) -> str:
    state = index_state(box, entry)
    if state == "local-only":
        return f"nothing in Honcho: it was kept on this host only ({entry['reason']})"
    if state in ("pending", "queued", "failed"):
        return f"{entry['item']} has not been sent yet: it will not be sent at all"
    if state == "not-sent":
        return f"{entry['item']} was never sent: nothing to take back"
    where = (box.fleet.get(f"{entry['item']}#0") or {}).get("ws") if box else None
    return (
        f"a retraction will be added beside {entry['item']} in {printed_fields.token(where or entry['ws'])} at the next send "
        "(Honcho cannot delete a message)" + (" once its lookup settles" if state == "in-doubt" else "")
    )


def remove(config: Config, ids: list[str], dry_run: bool = False) -> Removed:
    if not ids:
        raise Refused("artifact rm: name the experiments (exp_...) or artifacts (art_...) to remove")
    store, cards = store_of(config)
    if not store.is_set_up():
        raise NotFound(f"{ids[0]} is not on this host: there is no artifact store")
    result = Removed(dry_run)
    warnings: list[str] = []
    with store.lock():
        before = catalog.current(config.paths.state, cards.folder)
        reconcile(config, store, cards, warnings)  # a card a record cut short is in the outbox before it is taken back
        chosen = {c["experiment_id"]: c for ident in ids for c in _found(cards, ident)}  # NotFound: nothing written
        if any(e["state"] == "pending" for c in chosen.values() for e in c["remote"]):
            raise Refused(
                "artifact rm: a card named is not yet in the outbox and the ledger cannot be written now ("
                + "; ".join(warnings)
                + "); nothing was removed"
            )
        box = _outbox(config)
        lines = []
        for card in chosen.values():
            entries = card["remote"]
            lines += [_retraction(card, e, box) for e in entries if e["ws"]]
            others = [
                n for n, c, _w in cards.all() if c and c["artifact"]["id"] == card["artifact"]["id"] and n not in chosen
            ]
            result.removed.append(
                {
                    "experiment": card["experiment_id"],
                    "artifact": card["artifact"]["id"],
                    "bytes_removed": not others,
                    "honcho": [_effect(box, e) for e in entries],
                }
            )
        if dry_run:
            return result
        if lines:
            Ledger(config.paths.ledger).append(
                lines
            )  # first: a crash after it leaves the card to rm again, never a card unretracted
        doubt = set(box.attempts) if box else set()
        for removed in result.removed:
            card = chosen[removed["experiment"]]
            experiment = card["experiment_id"]
            cards.retire(experiment, [e["item"] for e in card["remote"]])
            cards.remove(experiment)
            cards.clear_pending(experiment)
            for entry in card["remote"]:
                if entry["item"] not in doubt:
                    cards.remove_projection(experiment, entry["rev"])
            if removed["bytes_removed"]:
                store.remove_object(card["artifact"]["id"])
        refresh_catalog(config, cards, before, dict.fromkeys(chosen))
    return result


def _retraction(card: dict, entry: dict, box: Outbox | None) -> DecidedCard:
    where = (box.fleet.get(f"{entry['item']}#0") or {}).get("ws") if box else None
    return decided_card(
        retraction_item(entry["item"]),
        op="undo",
        experiment=card["experiment_id"],
        artifact=card["artifact"]["id"],
        session=card["session"],
        role=entry["role"],
        ws=where or entry["ws"],
        reason="artifact-rm",
        trust_class=entry["class"],
        untrusted_by=entry["untrusted_by"],
        actions=[{"do": "retract-card", "of": f"{entry['item']}#0"}],
        at=format_time(time.time()),
        target=entry["item"],
    )


def summary(config: Config) -> dict | None:
    """What sync shows of the store (counts only), or None when artifact memory is off and there is no store."""
    store, cards = store_of(config)
    if config.artifacts is None and not store.is_set_up():
        return None
    temps = store.temps() if store.is_set_up() else []
    return {
        "enabled": config.artifacts is not None,
        **usage(config, store, cards),
        "pending_records": len(cards.pending()) if store.is_set_up() else 0,
        "unfinished_records": sum(1 for t in temps if t[3]),
        "abandoned_temps": sum(1 for t in temps if not t[3]),
    }


QUOTA_ATTENTION = 0.9  # of a bound used: sync says so before records are refused


def sync_section(config: Config, box: Outbox, need) -> dict | None:
    """The store as sync shows it, counts only (never a title, an id's text or a path); `need(line)` for what needs
    the owner."""
    found = summary(config)
    if found is None:
        return None
    found["pending_index"] = sum(1 for r in box.pending.values() if r[KIND] == "card")
    found["failed_index"] = sum(1 for item in box.failed if item.startswith("card:"))
    nowhere: dict[str, int] = {}
    for key, count in box.decided.items():  # "kind/role/reason"
        kind, role, reason = key.split("/", 2)
        if (kind, role) == ("card", "none"):
            nowhere[reason] = nowhere.get(reason, 0) + count
    found["decided_nowhere"] = dict(sorted(nowhere.items()))
    if found["pending_records"]:
        need(
            f"{found['pending_records']} artifact card(s) kept on this host are not yet in the outbox (a "
            "record cut short, or the ledger could not be written): bxmem artifact verify queues them"
            + cite_runbook("artifact-not-queued")
        )
    used = [
        found["bytes"] / found["max_total_bytes"] if found["max_total_bytes"] else 0.0,
        found["cards"] / found["max_cards"] if found["max_cards"] else 0.0,
    ]
    if max(used) >= QUOTA_ATTENTION:
        need(
            f"the artifact store uses {found['bytes']:,} of {found['max_total_bytes']:,} bytes "
            f"({used[0]:.0%}) and {found['cards']:,} of {found['max_cards']:,} cards: bxmem artifact rm "
            "what is not needed" + cite_runbook("artifact-quota")
        )
    return found


def cards_text(count: int | None) -> str:
    return f", {count} artifact card(s)" if count else ""


def sync_lines(found: dict | None) -> list[str]:
    if found is None:
        return []
    state = "artifacts" if found["enabled"] else "artifacts (off: no [artifacts]; the store is still there)"
    limits = (
        f" of {found['max_total_bytes']:,}" if found["max_total_bytes"] else "",
        f" of {found['max_cards']:,}" if found["max_cards"] else "",
    )
    out = [
        f"{state}: {found['cards']:,}{limits[1]} card(s), {found['objects']:,} object(s), {found['bytes']:,}{limits[0]} "
        f"bytes; {found['pending_index']} card item(s) pending for Honcho, {found['failed_index']} failed"
        + (f"; {found['unfinished_records']} record(s) copying now" if found["unfinished_records"] else "")
    ]
    if found["decided_nowhere"]:
        out.append(
            "artifact cards kept on this host only: "
            + ", ".join(f"{reason} {n}" for reason, n in found["decided_nowhere"].items())
        )
    return out
