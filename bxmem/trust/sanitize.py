"""What text may leave the host, and in what form. The secret rules are a floor, not data-loss prevention:
a secret without a recognisable shape is not caught.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right

from bxmem.trust.unicode_ignorable import DEFAULT_IGNORABLE, STARTS

# What renders as nothing, by Unicode property rather than by example (docs/interfaces.md, "neutralised text").
# Changed, not stripped: a lone surrogate becomes U+FFFD, so a reader sees something was there; Zl, Zp and CR become a
# newline, so line structure survives.
NEUTRALISE_VERSION = 2  # what neutralise strips changed: anything keyed by neutralised text is rebuilt
_STRIPPED_CATEGORIES = frozenset(("Cc", "Cf", "Co", "Cn"))
_LINE_BREAK_CATEGORIES = frozenset(("Zl", "Zp"))
_ASCII_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_VERDICTS: dict[str, str | None] = {}  # a character -> what it becomes; None: itself
_MAX_VERDICTS = 65_536  # a text of a million distinct characters costs time, not memory


def _default_ignorable(code: int) -> bool:
    at = bisect_right(STARTS, code) - 1
    return at >= 0 and code <= DEFAULT_IGNORABLE[at][1]


def replacement(char: str) -> str | None:
    """What `neutralise` makes of one character: "" (stripped), "\n", U+FFFD, or None (kept)."""
    if char in "\t\n":
        return None
    category = unicodedata.category(char)
    if category == "Cs":
        return "\ufffd"
    if category in _LINE_BREAK_CATEGORIES or char == "\r":
        return "\n"
    if category in _STRIPPED_CATEGORIES or _default_ignorable(ord(char)):
        return ""
    return None


def neutralise(text: str) -> str:
    """Strip what renders as nothing, normalise to NFC. Each distinct character is judged once and remembered: a pass
    over the text plus one lookup per distinct character."""
    text = text.replace("\r\n", "\n")
    if text.isascii():  # the common case: only C0 controls and DEL to find
        return _ASCII_INVISIBLE.sub("", text.replace("\r", "\n"))
    table = {}
    for char in set(text):
        if char in _VERDICTS:
            verdict = _VERDICTS[char]
        else:
            verdict = replacement(char)
            if len(_VERDICTS) < _MAX_VERDICTS:
                _VERDICTS[char] = verdict
        if verdict is not None:
            table[ord(char)] = verdict
    return unicodedata.normalize("NFC", text.translate(table) if table else text)


# Each rule: a name for the ledger and logs (never the match), and a pattern.
# Compiled on first use (`secret_rules()`): `bxmem recall` only neutralises,
# and would pay for compiling them on every call (docs/performance.md, "Recall").
_SECRET_PATTERNS: tuple[tuple[str, str], ...] = (
    ("aws-access-key-id", r"\b(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA|AGPA|ANPA|ANVA|APKA)[0-9A-Z]{16}\b"),
    ("aws-secret-access-key", r"(?i:aws.{0,20}?(?:secret|private).{0,20}?['\"=: ]\s*)[A-Za-z0-9/+]{40}\b"),
    ("github-token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b"),
    ("github-fine-grained-pat", r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b"),
    ("gitlab-token", r"\bglpat-[A-Za-z0-9_-]{20,}\b"),
    ("anthropic-api-key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai-api-key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("slack-webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]{20,}"),
    ("stripe-key", r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("google-oauth-secret", r"\bGOCSPX-[A-Za-z0-9_-]{20,}"),
    ("pem-private-key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("pypi-token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}"),
    ("huggingface-token", r"\bhf_[A-Za-z0-9]{34,}\b"),
    ("sendgrid-key", r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b"),
    ("twilio-key", r"\bSK[0-9a-f]{32}\b"),
    ("digitalocean-token", r"\bdo[opr]_v1_[a-f0-9]{64}\b"),
    ("shopify-token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
    ("telegram-bot-token", r"\b[0-9]{8,10}:AA[A-Za-z0-9_-]{33}\b"),
    ("age-secret-key", r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b"),
    ("url-with-password", r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@]+:[^\s:/@]{3,}@[^\s/]+"),
)
_compiled: tuple[tuple[str, re.Pattern[str]], ...] | None = None


def secret_rules() -> tuple[tuple[str, re.Pattern[str]], ...]:
    global _compiled
    if _compiled is None:
        _compiled = tuple((name, re.compile(pattern)) for name, pattern in _SECRET_PATTERNS)
    return _compiled


def find_secret(text: str) -> str | None:
    """The name of the first secret rule that matches, or None.

    Matching runs on the neutralised text too, so a zero-width character
    inside a key does not hide it. (One pattern per rule, not one alternation:
    separate patterns keep the regex engine's literal-prefix scan, which is faster.)
    """
    cleaned = neutralise(text)
    for candidate in (text, cleaned) if cleaned != text else (text,):
        for name, pattern in secret_rules():
            if pattern.search(candidate):
                return name
    return None


def chunks(text: str, size: int) -> list[str]:
    """Split text into pieces of at most `size` characters, in order; "" stays one empty piece."""
    if not text:
        return [""]
    return [text[i : i + size] for i in range(0, len(text), size)]
