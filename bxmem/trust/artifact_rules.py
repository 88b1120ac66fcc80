"""Artifact memory's rules (docs/design.md, "Artifact memory"). Stdlib only, no typing: recall's lean path
loads it.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata

from bxmem.trust.sanitize import find_secret, neutralise

ARTIFACT_PREFIX, EXPERIMENT_PREFIX = "art_", "exp_"
IDENTITY_SCHEMA = 1  # in every experiment id: a change of what the identity holds is a new version
CARD_SCHEMA = "bxmem.artifact-card/1"  # the local card file
REMOTE_SCHEMA = 1  # the projection's format, in its text: a new format is a new delivery id
UNKNOWN = "unknown"  # a source version nobody gave: freshness cannot be checked against it

# The seed's default bounds (section 28.5); bxmem.toml may lower the first three.
MAX_ARTIFACT_BYTES = 1 << 30
MAX_TOTAL_BYTES = 20 << 30
MAX_CARDS = 10_000
MAX_TITLE = 200
MAX_SUMMARY = 2_000
MAX_TAGS = 20
MAX_TAG = 80
MAX_SOURCE_VERSION = 200
MAX_MEDIA_TYPE = 100
MAX_NAME_BYTES = 255  # NAME_MAX: one path component

_B32 = re.compile(r"[a-z2-7]{52}")
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,62}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,62}")
_INVISIBLE = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))


_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
_PAIRS: list[str] = []  # every 10 bits as two characters, made on first use


def b32(digest: bytes) -> str:
    """Lowercase RFC 4648 base32 without padding (52 characters for a SHA-256): base64.b32encode's characters (a test
    holds them equal), computed ten bits at a time on one integer, because base64's goes a byte at a time in
    Python and a stale catalog checks 10,000 cards' ids."""
    if not _PAIRS:
        _PAIRS.extend(a + b for a in _ALPHABET for b in _ALPHABET)
    bits = 8 * len(digest)
    chars = -(-bits // 5)
    pairs = -(-chars // 2)
    n = int.from_bytes(digest, "big") << (10 * pairs - bits)
    return "".join([_PAIRS[(n >> (10 * i)) & 1023] for i in range(pairs - 1, -1, -1)])[:chars]


def artifact_id(sha256_digest: bytes) -> str:
    return ARTIFACT_PREFIX + b32(sha256_digest)


def canonical_json(value: object) -> bytes:
    """Keys sorted, no blank space, UTF-8 as is: one byte string per value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def identity(agent: str | None, artifact: str, query_fingerprint: str | None, source_version: str) -> dict:
    """What an experiment is (seed 002 27.2, the agent standing for the project):
    title, summary and tags are not part of it."""
    return {
        "schema": IDENTITY_SCHEMA,
        "agent": agent,
        "artifact": artifact,
        "query_fingerprint": query_fingerprint,
        "source_version": source_version,
    }


def experiment_id(agent: str | None, artifact: str, query_fingerprint: str | None, source_version: str) -> str:
    digest = hashlib.sha256(canonical_json(identity(agent, artifact, query_fingerprint, source_version))).digest()
    return EXPERIMENT_PREFIX + b32(digest)


def is_artifact_id(value: object) -> bool:
    return isinstance(value, str) and value.startswith(ARTIFACT_PREFIX) and bool(_B32.fullmatch(value[4:]))


def is_experiment_id(value: object) -> bool:
    return isinstance(value, str) and value.startswith(EXPERIMENT_PREFIX) and bool(_B32.fullmatch(value[4:]))


def object_folder(artifact: str) -> str:
    return artifact[len(ARTIFACT_PREFIX) : len(ARTIFACT_PREFIX) + 2]


# --- what a record may carry ------------------------------------------------------------


def name_problem(name: str) -> str | None:
    """Why `name` is not one file name directly inside exports/, or None:

    | the name                                                  | refused: |
    | empty, `.` or `..`                                        | not a file's name |
    | holds `/` or NUL                                          | not one path component |
    | holds a control, format or line-break character, or bytes | not a plain file name |
    | that are not UTF-8 (a lone surrogate, as argv decodes them) |                  |
    | over 255 bytes as UTF-8                                   | too long |
    """
    if name in ("", ".", ".."):
        return "is not a file's name"
    if "/" in name or "\0" in name:
        return "is not one path component (a name directly inside exports/, no '/')"
    if any(unicodedata.category(c) in _INVISIBLE for c in name):
        return "holds a control, format or line-break character, or bytes that are not UTF-8"
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return f"is over {MAX_NAME_BYTES} bytes"
    return None


def one_line(text: str) -> str:
    return " ".join(neutralise(text).split())


def clean_summary(summary: str) -> str:
    return neutralise(summary).strip()


def clean_tags(tags: list[str]) -> list[str]:
    return list(dict.fromkeys(t for t in (one_line(tag) for tag in tags) if t))


def metadata_problem(
    title: str, summary: str, tags: list[str], source_version: str, query_fingerprint: str | None, media_type: str
) -> str | None:
    """Why what the model gave cannot be recorded (bounds are refused, never cut), or None.
    Lengths are counted on the neutralised text."""
    checks = (
        ("--title", one_line(title), MAX_TITLE),
        ("--summary", clean_summary(summary), MAX_SUMMARY),
        ("--source-version", one_line(source_version), MAX_SOURCE_VERSION),
    )
    for option, text, limit in checks:
        if len(text) > limit:
            return f"{option} is {len(text):,} characters; at most {limit:,}"
    cleaned = clean_tags(tags)
    if len(cleaned) > MAX_TAGS:
        return f"{len(cleaned)} tags; at most {MAX_TAGS}"
    for tag in cleaned:
        if len(tag) > MAX_TAG:
            return f"a --tag is {len(tag)} characters; at most {MAX_TAG}"
    if not one_line(source_version):
        return "--source-version is empty (leave it out to record the version as unknown)"
    if query_fingerprint is not None and not _FINGERPRINT.fullmatch(query_fingerprint):
        return "--query-fingerprint is not a SHA-256 in lowercase hex (64 characters of 0-9 a-f)"
    if len(media_type) > MAX_MEDIA_TYPE or not _MEDIA_TYPE.fullmatch(media_type):
        return "--media-type is not a media type (type/subtype)"
    return None


# --- the card's remote projection (seed 002 27.4, 29.3) -----------------------------------

CARD_HEADER = "[artifact card]"


def projection(
    *,
    experiment: str,
    artifact: str,
    size: int,
    media_type: str,
    title: str,
    summary: str,
    tags: list[str],
    source_version: str,
    query_fingerprint: str | None,
) -> tuple[str | None, str | None]:
    """The text Honcho gets for a card, built from these allowlisted fields alone
    (never a path, the file's name, its bytes, the session or the raw query), each
    neutralised, bounded and made one line; or (None, why it is not sent):

    | the fields                                        | not sent, reason          |
    | the summary is empty once neutralised             | empty-summary             |
    | the text holds a known-prefix secret              | secret-in-card (<rule>)   |
    """
    about = one_line(summary)[:MAX_SUMMARY]
    if not about:
        return None, "empty-summary"
    lines = [f"{CARD_HEADER} {one_line(title)[:MAX_TITLE] or '(untitled)'}", about]
    shown_tags = [tag[:MAX_TAG] for tag in clean_tags(tags)[:MAX_TAGS]]
    if shown_tags:
        lines.append("tags: " + ", ".join(shown_tags))
    lines.append(f"source version: {one_line(source_version)[:MAX_SOURCE_VERSION] or UNKNOWN}")
    lines.append(f"experiment {experiment}, artifact {artifact} ({size:,} bytes, {media_type})")
    if query_fingerprint is not None:
        lines.append(f"query fingerprint {query_fingerprint}")
    lines.append(f"card format {REMOTE_SCHEMA}")
    text = "\n".join(lines)
    rule = find_secret(text)
    if rule is not None:
        return None, f"secret-in-card ({rule})"
    return text, None


def revision(text: str) -> str:
    """A projection's revision: part of its delivery id, so the same text is the same item."""
    return b32(hashlib.sha256(text.encode("utf-8")).digest())[:16]


def card_item(experiment: str, rev: str, generation: int = 1) -> str:
    """The outbox item of one projection of a card: deterministic from the experiment and
    the projection's text; `generation` counts records of it again after `artifact rm`."""
    return f"card:{experiment}:{rev}" + (f"-{generation}" if generation > 1 else "")


def retraction_item(card: str) -> str:
    return card + ":rm"


RETRACTION_HEAD = "retracted: the owner removed artifact card "


def retraction_text(experiment: str, artifact: str) -> str:
    """What `artifact rm` leaves beside a card Honcho keeps (it cannot delete a message): ids only."""
    return f"{RETRACTION_HEAD}{experiment} (artifact {artifact}); it no longer resolves on this agent's host"


def retracted_card(text: str) -> str | None:
    """The experiment a retraction names, or None: how another agent's recall knows its owner removed a card."""
    found = re.match(re.escape(RETRACTION_HEAD) + r"(exp_[a-z2-7]{52}) \(artifact art_[a-z2-7]{52}\);", text)
    return found.group(1) if found else None


def parse_card_text(text: str) -> tuple[str, str] | None:
    """(experiment id, artifact id) named by a card's projection, or None: how recall knows a card among Honcho's
    hits (another agent's, never trusted by this)."""
    if not text.startswith(CARD_HEADER):
        return None
    found = re.search(r"^experiment (exp_[a-z2-7]{52}), artifact (art_[a-z2-7]{52}) \(", text, re.MULTILINE)
    return (found.group(1), found.group(2)) if found else None


# --- resolving -------------------------------------------------------------------------------


def freshness(recorded: str, current: str | None) -> str:
    """Seed 002 30.2:

    | asked with a current version? | recorded and current         | freshness     |
    | no                            |                              | not_checked   |
    | yes                           | either is `unknown` or empty | unverifiable  |
    | yes                           | equal                        | fresh         |
    | yes                           | different                    | stale         |
    """
    if current is None:
        return "not_checked"
    current = one_line(current)
    if recorded == UNKNOWN or not recorded or current in (UNKNOWN, ""):
        return "unverifiable"
    return "fresh" if recorded == current else "stale"
