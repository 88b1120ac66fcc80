"""The documents `artifact record --json` and `resolve --json` print for the host. resolve's text holds
stored text, fenced as recall's is (retrieval/render.py): fallible data, never able to forge a line of bxmem's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from bxmem.errors import ExitCode
from bxmem.retrieval import render
from bxmem.trust.labels import MEMORY, TAINTED
from bxmem.trust.sanitize import neutralise

RECORD_SCHEMA = "bxmem.artifact-record/1"
RESOLVE_SCHEMA = "bxmem.artifact-resolve/1"
NOTHING_READ = {"untrusted": False, "class": "public"}  # record gives the model nothing from memory


@dataclass
class Recorded:
    experiment: str
    artifact: str
    sha256: str
    size: int
    media_type: str
    deduplicated: bool
    index_state: str  # queued | local-only | pending (not yet in the outbox: a ledger append failed)
    index_reason: str
    workspace_role: str | None
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return record_document(self)

    def lines(self) -> list[str]:
        return [record_document(self)["text"]] + [f"warning: {w}" for w in self.warnings]

    @property
    def exit_code(self) -> int:
        return ExitCode.OK


@dataclass
class Resolved:
    card: dict
    path: str
    freshness: str
    label: tuple[bool, str]
    verified_at: str
    warnings: list[str]

    def as_json(self) -> dict:
        return resolve_document(self)

    def lines(self) -> list[str]:
        return [resolve_document(self)["text"]]

    @property
    def exit_code(self) -> int:
        return ExitCode.OK


_WHERE = {"trusted": "this agent's trusted workspace", "untrusted": "this agent's untrusted workspace"}


def record_document(r: Recorded) -> dict:
    if r.index_state == "queued":
        index = f"queued for Honcho ({_WHERE.get(r.workspace_role or '', 'a workspace')}), sent by the next bxmem send"
    elif r.index_state == "pending":
        index = "kept on this host; not yet queued for Honcho (see warnings)"
    else:
        index = f"kept on this host only, not sent to Honcho: {r.index_reason}"
    text = (
        f"kept as artifact {r.artifact} ({r.size:,} bytes, {r.media_type}), experiment {r.experiment}"
        f"{' (the same bytes were kept before)' if r.deduplicated else ''}; {index}. Resolve it with artifact_resolve "
        "and either id."
    )
    return {
        "schema": RECORD_SCHEMA,
        "label": dict(NOTHING_READ),
        "text": text,
        "experiment_id": r.experiment,
        "artifact_id": r.artifact,
        "sha256": r.sha256,
        "bytes": r.size,
        "media_type": r.media_type,
        "local_saved": True,
        "deduplicated": r.deduplicated,
        "honcho_queued": r.index_state == "queued",
        "index_state": r.index_state,
        "index_reason": r.index_reason,
        "warnings": list(r.warnings),
    }


def _one_line(value: str) -> str:
    return " ".join(neutralise(value).split())


def resolve_document(r: Resolved) -> dict:
    card, art = r.card, r.card["artifact"]
    untrusted, trust_class = r.label
    tag = TAINTED if untrusted else MEMORY
    nonce = os.urandom(8).hex()
    lines = [
        render.opening("artifact", nonce, r.label, "1 artifact"),
        f"[1] local | {tag} | {render.field(trust_class)} | {art['id']} | experiment {card['experiment_id']}",
        f"path: {_one_line(r.path)}",
        f"bytes {art['bytes']:,} | sha256 verified {r.verified_at} | {render.field(art['media_type'])} | "
        f"freshness {r.freshness}",
    ]
    lines += [f"warning: {w}" for w in r.warnings]
    lines += render.content(
        "\n".join(
            filter(
                None,
                [
                    card["title"],
                    card["summary"],
                    "tags: " + ", ".join(card["tags"]) if card["tags"] else "",
                    "source version: " + card["identity"]["source_version"],
                ],
            )
        )
    )
    lines.append(render.closing("artifact", nonce))
    return {
        "schema": RESOLVE_SCHEMA,
        "label": {"untrusted": untrusted, "class": trust_class},
        "text": "\n".join(lines),
        "tag": tag,
        "experiment_id": card["experiment_id"],
        "artifact_id": art["id"],
        "sha256": art["sha256"],
        "bytes": art["bytes"],
        "media_type": art["media_type"],
        "path": r.path,
        "title": card["title"],
        "summary": card["summary"],
        "tags": list(card["tags"]),
        "source_version": card["identity"]["source_version"],
        "freshness": r.freshness,
        "verified_at": r.verified_at,
        "warnings": list(r.warnings),
    }
