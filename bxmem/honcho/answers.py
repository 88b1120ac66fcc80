"""Every field of a Honcho answer bxmem stores or acts on, checked, or AnswerProblem naming the field (never
its value). What is stored, put in a path or matched against the ledger must be a Honcho id; what is only
shown may be any string, and goes through trust/printed_fields.py.
"""

from __future__ import annotations

import re

ID_RE = re.compile(r"[A-Za-z0-9_-]{1,512}")
ID_RULE = "1-512 of A-Z a-z 0-9 _ -"


def is_honcho_id(value: object) -> bool:
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None


class AnswerProblem(ValueError):
    """A field of an answer is not what bxmem needs: `where` names it, `what` says how."""

    def __init__(self, where: str, what: str) -> None:
        self.where, self.what = where, what
        super().__init__(f"{where} {what}" if where else what)


def _kind(value: object) -> str:
    """The JSON type of a value, to say what came instead (never the value itself)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _at(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def obj(value: object, where: str = "") -> dict:
    if not isinstance(value, dict):
        raise AnswerProblem(where or "the answer", f"is {_kind(value)}, not an object")
    return value


def array(value: object, where: str = "") -> list:
    if not isinstance(value, list):
        raise AnswerProblem(where or "the answer", f"is {_kind(value)}, not an array")
    return value


def honcho_id(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise AnswerProblem(where, f"is {_kind(value)}, not a Honcho id")
    if ID_RE.fullmatch(value) is None:
        raise AnswerProblem(where, f"is not a Honcho id ({ID_RULE})")
    return value


def text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise AnswerProblem(where, f"is {_kind(value)}, not a string")
    return value


def optional_text(value: object, where: str) -> str | None:
    return None if value is None else text(value, where)


def metadata(value: object, where: str) -> dict:
    """A message's metadata: an object, or absent (then empty). Its values are the
    caller's to check (commands/send/lookup.is_ours and audit look at each one's type)."""
    return {} if value is None else obj(value, where)


# --- what each route answers ----------------------------------------------------------


def created_ids(body: object, count: int) -> list[str]:
    """The ids of what a create made: one object per thing asked for, in order, each with its own Honcho id."""
    items = array(body)
    if len(items) != count:
        raise AnswerProblem("the answer", f"lists {len(items)} item(s) for the {count} sent")
    ids = [honcho_id(obj(item, f"[{n}]").get("id"), f"[{n}].id") for n, item in enumerate(items)]
    if len(set(ids)) != len(ids):
        raise AnswerProblem("the answer", "gives one id to two of the items sent")
    return ids


def configuration(body: object) -> dict | None:
    """A workspace's stored configuration (None: the answer holds none), compared by api.configuration_applied."""
    found = obj(body).get("configuration")
    return None if found is None else obj(found, "configuration")


def page(body: object, size: int, asked: int) -> tuple[list, bool]:
    """Page `asked` of a list route: its items (at most `size`, as asked) and
    whether another page follows."""
    answer = obj(body)
    items = array(answer.get("items"), "items")
    pages = answer.get("pages")
    if pages is not None and (type(pages) is not int or pages < 0):
        raise AnswerProblem("pages", f"is {_kind(pages)}, not a count")
    return items[:size], bool(items) and pages is not None and asked < pages


def _listed(raw: object, where: str, fields: tuple[str, ...]) -> dict:
    found = obj(raw, where)
    listed = {"id": honcho_id(found.get("id"), _at(where, "id"))}
    listed.update({field: text(found.get(field), _at(where, field)) for field in fields})
    return listed


def listed_message(raw: object, where: str) -> dict:
    listed = _listed(raw, where, ("peer_id", "content"))
    listed["metadata"] = metadata(obj(raw, where).get("metadata"), _at(where, "metadata"))
    return listed


def listed_conclusion(raw: object, where: str) -> dict:
    return _listed(raw, where, ("content", "observer_id", "observed_id"))


def listed_id(raw: object, where: str) -> str:
    """A session's or a peer's id from its list: bxmem asks for it next, by path."""
    return honcho_id(obj(raw, where).get("id"), _at(where, "id"))


def search_hits(body: object, limit: int) -> list[dict]:
    hits = []
    for n, raw in enumerate(array(body)[:limit]):
        found, where = obj(raw, f"[{n}]"), f"[{n}]"
        hits.append(
            {
                "content": text(found.get("content"), _at(where, "content")),
                "peer_id": optional_text(found.get("peer_id"), _at(where, "peer_id")),
                "session_id": optional_text(found.get("session_id"), _at(where, "session_id")),
                "created_at": optional_text(found.get("created_at"), _at(where, "created_at")),
            }
        )
    return hits


def conclusion_hits(body: object, limit: int) -> list[dict]:
    return [conclusion_hit(raw, f"[{n}]") for n, raw in enumerate(array(body)[:limit])]


def conclusion_hit(raw: object, where: str) -> dict:
    found = obj(raw, where)
    return {
        "content": text(found.get("content"), _at(where, "content")),
        "observer_id": optional_text(found.get("observer_id"), _at(where, "observer_id")),
        "session_id": optional_text(found.get("session_id"), _at(where, "session_id")),
        "created_at": optional_text(found.get("created_at"), _at(where, "created_at")),
    }


def chat_content(body: object) -> str | None:
    return optional_text(obj(body).get("content"), "content")


MAX_COUNT = 2**53  # a count past any JSON reader's exact integers is not one Honcho keeps
QUEUE_STATES = ("pending", "in_progress", "completed", "total")


def _count(value: object, where: str) -> int:
    if type(value) is not int or not 0 <= value < MAX_COUNT:
        raise AnswerProblem(where, f"is {_kind(value)}, not a count" if type(value) is not int else "is not a count")
    return value


def queue_status(body: object) -> dict[str, int]:
    """A workspace's queue (queue/status): its work units by state. Honcho counts only
    derivation work (representation, summary, dream); `completed` since its last cleanup.
    The per-session breakdown is not read."""
    found = obj(body)
    return {state: _count(found.get(f"{state}_work_units"), f"{state}_work_units") for state in QUEUE_STATES}


def api_version(body: object) -> str:
    """The version the server's OpenAPI document gives (`info.version`): only shown."""
    version = text(obj(obj(body).get("info"), "info").get("version"), "info.version")
    if not 1 <= len(version) <= 64:
        raise AnswerProblem("info.version", "is not a version (1 to 64 characters)")
    return version
