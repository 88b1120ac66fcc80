"""An artifact card's outbox text, read back by the revision decided (never rebuilt from a card that may
have changed since, else the item fails), and its retraction's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bxmem.commands.send.plan import LocalFailure
from bxmem.store.artifact_cards import Cards
from bxmem.store.artifacts import Store
from bxmem.trust import artifact_rules
from bxmem.trust.sanitize import find_secret

if TYPE_CHECKING:
    from bxmem.config.loader import Config


def card_text(config: Config, item: dict, action: dict) -> str:
    rev = action.get("rev")
    if not isinstance(rev, str):
        raise LocalFailure("the card's decision names no projection")
    text = Cards(Store(config.paths.artifacts, config.paths.state)).read_projection(item["experiment"], rev)
    if text is None:
        raise LocalFailure(
            f"not sent: the projection of card {item['experiment']} (revision {rev}) is gone or changed "
            "since it was recorded"
        )
    rule = find_secret(text)  # a rule added since the record
    if rule is not None:
        raise LocalFailure(f"not sent: the card holds a secret ({rule})")
    return text


def retraction_text(item: dict) -> str:
    """Beside a card Honcho keeps (it cannot delete a message): ids only, no card text."""
    return artifact_rules.retraction_text(item["experiment"], item["artifact"])
