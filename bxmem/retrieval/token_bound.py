"""An upper bound on a text's o200k_base tokens that holds for any text (docs/design.md, "Reading" gives the
argument). tests/test_tokens.py checks it on random text against the real tokenizer. Stdlib only.
"""

from __future__ import annotations

import re
import unicodedata

# Categories that hold no letter or mark (no number) in any Unicode version: Cn, unassigned
# here, may be a letter in the tokenizer's newer tables, and Cf is left out with it.
_NO_LETTER = ("P", "S", "Z", "N", "Cc", "Cs", "Co")
_NO_NUMBER = ("P", "S", "Z", "L", "M", "Cc", "Cs", "Co")
PREFIX = 3  # as scripts/gen-token-table groups the pieces
_CUT_BEFORE_WORD = frozenset("\n\r0123456789")

# A word (group 1 the space, 2 the letters, 3 the clitic) not followed by a letter or an
# apostrophe, or a run of digits. What precedes and follows is checked in code.
_PIECE = re.compile(r"( ?)([A-Z]*[a-z]+|[A-Z]+)('(?:[sStTmMdD]|[rR][eE]|[vV][eE]|[lL][lL]))?(?![A-Za-z'])|[0-9]+")


class _Vocabulary:
    """o200k_words.TABLE (scripts/gen-token-table writes it), split once a process: a line a
    group of pieces (their first PREFIX characters, a tab, the pieces between bars), sorted,
    found by bisection; then the crossing tokens and the clitics."""

    def __init__(self) -> None:
        from bxmem.retrieval.o200k_words import TABLE  # deferred: lean (once a word is met: about 2 ms)

        lines = TABLE.splitlines()
        self.clitics = frozenset(lines.pop().partition("\t")[2].split("|"))  # written after the groups
        self.crossing = [tuple(c.split("\t")) for c in lines.pop().partition("\t")[2].split("|")]
        self.lines = lines
        self.known: dict[str, bool] = {}

    def one_token(self, piece: str) -> bool:
        found = self.known.get(piece)
        if found is None:
            from bisect import bisect_left  # deferred: lean (the first word met)

            key = piece[:PREFIX] + "\t"
            at = bisect_left(self.lines, key)
            found = self.known[piece] = (
                at < len(self.lines)
                and self.lines[at].startswith(key)
                and f"|{piece}|" in f"|{self.lines[at][len(key) :]}|"
            )
        return found

    def may_join(self, piece: str, clitic: str) -> bool:
        """Whether a token could span the word's end and the clitic's apostrophe."""
        letters = clitic[1:]
        return any(before and piece.endswith(before) and letters.startswith(after) for before, after in self.crossing)


_vocabulary: _Vocabulary | None = None


def vocabulary() -> _Vocabulary:
    global _vocabulary
    if _vocabulary is None:
        _vocabulary = _Vocabulary()
    return _vocabulary


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _ends_word(ch: str) -> bool:
    """Whether a piece of letters cannot go on with `ch`: no letter, no mark."""
    if ch.isascii():
        return not ch.isalpha()
    return unicodedata.category(ch).startswith(_NO_LETTER)


def _ends_number(ch: str) -> bool:
    """Whether a run of digits cannot go on with `ch`: no number."""
    if ch.isascii():
        return not ch.isdigit()
    return unicodedata.category(ch).startswith(_NO_NUMBER)


def bound(text: str) -> int:
    """At least as many tokens as o200k_base makes of `text`, whatever it holds."""
    table = None
    total = at = 0
    size = len(text)
    for m in _PIECE.finditer(text):
        start, end = m.span()
        space, word, clitic = m.group(1, 2, 3)
        if word is None:  # a run of digits: never beside another number, of any script
            if (start and not _ends_number(text[start - 1])) or (end < size and not _ends_number(text[end])):
                continue
            cost = -(-(end - start) // 3)
        else:
            # With its space a word always begins a piece; without, only after a cut.
            if (end < size and not _ends_word(text[end])) or (
                not space and start and text[start - 1] not in _CUT_BEFORE_WORD
            ):
                continue
            table = table or vocabulary()
            piece = space + word
            cost = 1 if table.one_token(piece) else len(piece)
            if clitic:
                if table.may_join(piece, clitic):
                    cost = len(piece) + len(clitic)
                else:
                    cost += 1 if clitic in table.clitics else len(clitic)
        total += _bytes(text[at:start]) + cost
        at = end
    return total + _bytes(text[at:])
