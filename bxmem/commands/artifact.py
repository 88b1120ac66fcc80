"""`bxmem artifact record` and `resolve`, the two the host runs (docs/agent-tools.md). record publishes,
routes and writes the card and appends its decision under the store's lock before it returns; Honcho gets the
card at the next `send`. resolve gives bytes only once their size and SHA-256 are checked.
"""

from __future__ import annotations

import os
import time

from bxmem.commands.artifact_doc import Recorded, Resolved
from bxmem.config.loader import ArtifactSettings, Config
from bxmem.errors import IntegrityFailed, NotFound, Refused, StorageError, UsageError
from bxmem.formats.timestamps import format_time
from bxmem.sources import brokerd
from bxmem.sources.loopd import session_id_problem, session_labels
from bxmem.start.version import __version__
from bxmem.store import artifact_catalog as catalog
from bxmem.store import artifact_ingest
from bxmem.store.artifact_cards import Cards, CardUnusable
from bxmem.store.artifacts import Store, media_type_of, remove_file
from bxmem.store.ledger import Ledger, ReadResult
from bxmem.store.ledger_events import decided_card
from bxmem.trust.artifact_rules import (
    CARD_SCHEMA,
    UNKNOWN,
    artifact_id,
    card_item,
    clean_summary,
    clean_tags,
    experiment_id,
    freshness,
    identity,
    is_artifact_id,
    is_experiment_id,
    metadata_problem,
    name_problem,
    one_line,
    projection,
    revision,
)
from bxmem.trust.card_route import CardFacts, card_label, route_card
from bxmem.trust.labels import higher_class


def settings(config: Config) -> ArtifactSettings:
    config.paths.require_home()  # never a store made in a home that is not there (a wrong HOME or user)
    if config.artifacts is None:
        raise Refused("artifact memory is not enabled: add an [artifacts] section to bxmem.toml (docs/config.md)")
    return config.artifacts


def store_of(config: Config) -> tuple[Store, Cards]:
    config.paths.require_home()
    store = Store(config.paths.artifacts, config.paths.state)
    return store, Cards(store)


def check_session(session: str) -> None:
    problem = session_id_problem(session)
    if problem:
        raise UsageError(f"--session {session!r}: {problem}")


def record(
    config: Config,
    session: str,
    name: str,
    *,
    title: str = "",
    summary: str = "",
    tags: list[str] | None = None,
    source_version: str | None = None,
    query_fingerprint: str | None = None,
    media_type: str | None = None,
    broker_timeout: float = brokerd.TIMEOUT_S,
) -> Recorded:
    limits = settings(config)
    check_session(session)
    why = name_problem(name)
    if why:
        raise UsageError(f"the file name {name!r} {why}")
    tags = tags or []
    version = one_line(source_version) if source_version is not None else UNKNOWN
    media = media_type or media_type_of(name)
    why = metadata_problem(
        title, summary, tags, source_version if source_version is not None else UNKNOWN, query_fingerprint, media
    )
    if why:
        raise UsageError(why)
    store, cards = store_of(config)
    store.ensure()
    with artifact_ingest.open_export(config.paths.home, session, name, limits.max_artifact_bytes) as export:
        with store.lock():
            if cards.count() >= limits.max_cards:
                raise Refused(
                    f"the artifact store holds {limits.max_cards:,} cards ([artifacts] max_cards): bxmem artifact "
                    "rm what is not needed (see: bxmem runbook artifact-quota)"
                )
            fd, temp = store.reserve(export.size, limits.max_total_bytes)
        try:
            try:
                digest = artifact_ingest.stream(export, fd)
                os.fsync(fd)
            finally:
                os.close(fd)
            artifact = artifact_id(digest)
            artifact_ingest.checkpoint("copied")
            deduplicated = store.publish(temp, artifact)
        finally:
            remove_file(temp)
        size = export.size
    artifact_ingest.checkpoint("published")
    agent = config.honcho.agent if config.honcho else None
    experiment = experiment_id(agent, artifact, query_fingerprint, version)
    text, no_text = projection(
        experiment=experiment,
        artifact=artifact,
        size=size,
        media_type=media,
        title=title,
        summary=summary,
        tags=tags,
        source_version=version,
        query_fingerprint=query_fingerprint,
    )
    facts, untrusted_by = _facts(config, session, no_text, broker_timeout)
    route = route_card(facts)
    label = card_label(facts)
    now = format_time(time.time())
    fields = {
        "title": one_line(title),
        "summary": clean_summary(summary),
        "tags": clean_tags(tags),
        "session": session,
        "exported_as": name,
    }
    result = Recorded(experiment, artifact, digest.hex(), size, media, deduplicated, "queued", route.reason, route.role)
    with store.lock():
        before = catalog.current(config.paths.state, cards.folder)
        reconcile(config, store, cards, result.warnings)
        try:
            old = cards.read(experiment)
        except CardUnusable as exc:
            result.warnings.append(f"{exc}; replaced by this record")
            cards.remove(experiment)
            old = None
        card = _card(
            old,
            experiment,
            identity(agent, artifact, query_fingerprint, version),
            {"id": artifact, "sha256": digest.hex(), "bytes": size, "media_type": media, "created_at": now},
            fields,
            label,
            now,
        )
        rev = cards.write_projection(experiment, text) if text is not None else revision(f"\0{route.reason}\0{fields}")
        entry = _new_entry(config, card, cards.retired(experiment), rev, route, untrusted_by, label, now)
        if entry is None:  # this projection was decided before, as far as it can go: nothing new to send
            cards.write(card, old["revision"] if old else None)
            refresh_catalog(config, cards, before, {experiment: card})
            same = next(e for e in card["remote"] if e["rev"] == rev)
            result.index_state, result.index_reason, result.workspace_role = same["state"], same["reason"], same["role"]
            return result
        entry["ledger_at"] = Ledger(config.paths.ledger).size()  # where to look for it, should this record be cut short
        card["remote"].append(entry)
        result.index_reason = entry["reason"]
        cards.mark_pending(experiment)
        cards.write(card, old["revision"] if old else None)
        artifact_ingest.checkpoint("card-written")
        result.index_state = _queue(config, cards, card, entry, result.warnings)
        refresh_catalog(config, cards, before, {experiment: card})
    artifact_ingest.checkpoint("done")
    return result


def refresh_catalog(
    config: Config, cards: Cards, before: catalog.Catalog | None, changed: dict[str, dict | None]
) -> None:
    every = lambda: [card for _name, card, _why in cards.all() if card is not None]  # noqa: E731
    catalog.write(config.paths.ensure_state_dir(), cards.folder, catalog.updated(before, changed, every))


def _facts(config: Config, session: str, no_text: str | None, timeout: float) -> tuple[CardFacts, list[str]]:
    try:
        broker = brokerd.session_state(config.paths.broker_socket, session, timeout)
        answered = True
    except brokerd.BrokerUnavailable:
        broker, answered = brokerd.SessionState("secret", True), False
    labels, _why = session_labels(config.paths.logs, session)
    facts = CardFacts(
        broker_answered=answered,
        log_unreadable=labels.unreadable is not None,
        untrusted_by_log=labels.untrusted,
        log_class=labels.trust_class,
        untrusted_by_broker=broker.untrusted,
        broker_class=broker.trust_class,
        projection_problem=no_text,
    )
    untrusted_by = [
        name for name, flag in (("brokerd", broker.untrusted or not answered), ("log", labels.untrusted)) if flag
    ]
    return facts, untrusted_by


def _card(
    old: dict | None, experiment: str, ident: dict, artifact: dict, fields: dict, label: tuple[bool, str], now: str
) -> dict:
    """The card after this record: the descriptive fields replaced, the label only ever
    raised (what an earlier record's session saw, the card keeps), the rest kept."""
    if old is not None:
        label = (old["label"]["untrusted"] or label[0], higher_class(old["label"]["class"], label[1]))
        artifact = {**artifact, "created_at": old["artifact"]["created_at"]}
    return {
        "schema": CARD_SCHEMA,
        "revision": (old["revision"] + 1) if old else 1,
        "experiment_id": experiment,
        "identity": ident,
        "artifact": artifact,
        **fields,
        "label": {"untrusted": label[0], "class": label[1]},
        "created_at": old["created_at"] if old else now,
        "updated_at": now,
        "bxmem_version": __version__,
        "remote": list(old["remote"]) if old else [],
    }


def _new_entry(
    config: Config,
    card: dict,
    retired: set[str],
    rev: str,
    route,
    untrusted_by: list[str],
    label: tuple[bool, str],
    now: str,
) -> dict | None:
    """The outbox entry this record adds, or None when this projection was decided before and could go somewhere (or
    still cannot): one decided nowhere may be decided again by a record that can send it."""
    earlier = [e for e in card["remote"] if e["rev"] == rev]
    if earlier and (any(e["role"] for e in earlier) or route.role is None):
        return None
    experiment = card["experiment_id"]
    taken = {e["item"] for e in card["remote"]} | retired  # retired: decided before an `artifact rm`
    generation = 1
    while card_item(experiment, rev, generation) in taken:
        generation += 1
    ws = config.workspace(route.role).name if route.role and config.honcho else None
    reason = route.reason if not (route.role and config.local_only) else f"{route.reason}; local-only"
    return {
        "item": card_item(experiment, rev, generation),
        "rev": rev,
        "role": route.role,
        "ws": ws,
        "reason": reason,
        "class": label[1],
        "untrusted_by": untrusted_by,
        "state": "pending",
        "at": now,
    }


def _decision(card: dict, entry: dict):
    return decided_card(
        entry["item"],
        op="record",
        experiment=card["experiment_id"],
        artifact=card["artifact"]["id"],
        session=card["session"],
        role=entry["role"],
        ws=entry["ws"],
        reason=entry["reason"],
        trust_class=entry["class"],
        untrusted_by=entry["untrusted_by"],
        actions=[{"do": "card", "rev": entry["rev"]}] if entry["ws"] else [],
        at=entry["at"],
    )


def _queue(config: Config, cards: Cards, card: dict, entry: dict, warnings: list[str]) -> str:
    """Under the store's lock: the entry's decision into the ledger, unless it is there
    already (a record cut short after the append), then the card says so."""
    ledger = Ledger(config.paths.ledger)
    try:
        if not _in_ledger(ledger, entry["item"], entry.get("ledger_at", 0)):
            ledger.append([_decision(card, entry)])
    except (StorageError, OSError) as exc:
        warnings.append(
            f"card {card['experiment_id']} is kept on this host but not yet in the outbox ({exc}); "
            "the next bxmem artifact record or verify queues it"
        )
        return "pending"
    artifact_ingest.checkpoint("appended")
    previous = card["revision"]
    entry["state"] = "queued" if entry["ws"] else "local-only"
    card["revision"] += 1
    cards.write(card, previous)
    cards.clear_pending(card["experiment_id"])
    return entry["state"]


def _in_ledger(ledger: Ledger, item: str, offset: int) -> bool:
    return any(ev.get("ev") == "decided" and ev.get("item") == item for ev in ledger.iter_from(offset, ReadResult()))


def reconcile(config: Config, store: Store, cards: Cards, warnings: list[str]) -> int:
    """Under the store's lock: every card a record left pending (cut short between its
    card and its ledger line) queued now, exactly once. Returns how many."""
    store.recover_temps()
    done = 0
    for experiment in cards.pending():
        try:
            card = cards.read(experiment)
        except CardUnusable as exc:
            warnings.append(str(exc))
            card = None
        if card is None:
            cards.clear_pending(experiment)
            continue
        for entry in card["remote"]:
            if entry["state"] == "pending" and _queue(config, cards, card, entry, warnings) != "pending":
                done += 1
        if all(e["state"] != "pending" for e in card["remote"]):
            cards.clear_pending(experiment)
    return done


# --- resolve --------------------------------------------------------------------------------------


def find_cards(cards: Cards, ident: str) -> list[dict]:
    if is_experiment_id(ident):
        try:
            card = cards.read(ident)
        except CardUnusable as exc:
            raise IntegrityFailed(f"{exc}; it is not resolved") from None
        return [card] if card else []
    if is_artifact_id(ident):
        return [card for _name, card, _why in cards.all() if card is not None and card["artifact"]["id"] == ident]
    raise UsageError(f"{ident!r} is not an experiment id (exp_...) or an artifact id (art_...)")


def resolve(config: Config, ident: str, source_version: str | None = None, session: str | None = None) -> Resolved:
    limits = settings(config)
    if session is not None:
        check_session(session)
    if not (is_experiment_id(ident) or is_artifact_id(ident)):
        raise UsageError(f"{ident!r} is not an experiment id (exp_...) or an artifact id (art_...)")
    store, cards = store_of(config)
    found = find_cards(cards, ident) if store.is_set_up() else []
    if not found:
        other = (
            " (a card from another agent or the fleet resolves only where its bytes are: by its artifact id)"
            if is_experiment_id(ident)
            else ""
        )
        raise NotFound(f"{ident} is not on this host{other}")
    card = max(found, key=lambda c: c["updated_at"])
    untrusted = any(c["label"]["untrusted"] for c in found)
    trust_class = "public"
    for c in found:
        trust_class = higher_class(trust_class, c["label"]["class"])
    art = card["artifact"]
    path = store.verify(art["id"], art["bytes"], limits.integrity)
    fresh = freshness(card["identity"]["source_version"], source_version)
    warnings = []
    if fresh == "stale":
        warnings.append(
            "stale: recorded for another source version than the current one given; for comparison only, "
            "never current truth"
        )
    elif fresh == "unverifiable":
        warnings.append("unverifiable: a source version is unknown, so whether these bytes are current cannot be said")
    return Resolved(card, path, fresh, (untrusted, trust_class), format_time(time.time()), warnings)
