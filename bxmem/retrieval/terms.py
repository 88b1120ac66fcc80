"""The query's words and a long text's passages, which decide what reaches FTS5's porter stemmer. A query's
clitics are cut ("restic's" is "restic", never "restic" and "s"). Imports only `re`: recall's lean path loads it.
"""

from __future__ import annotations

import re

# The index's tokenizer, and the one the query is stemmed with: one setting, so the two never differ.
TOKENIZER = "porter unicode61 remove_diacritics 2"
MAX_TERMS = 32
PASSAGE_WORDS = 30

_WORD = re.compile(r"\w+")
# 's 't 'd 'm 'll 're 've after a word, with a straight or a curly apostrophe
_CLITIC = re.compile(r"(?<=\w)['\u2019](?:s|t|d|m|ll|re|ve)\b", re.IGNORECASE)
_SPAN = re.compile(r"\S+\s*")

# The stop words of classic retrieval systems (the 127 most frequent English
# function words), as they are typed: a question's "what did", "about the".
_STOP_WORDS = """
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself it
its itself they them their theirs themselves what which who whom this that these those am is are was were be been
being have has had having do does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on off over under again further
then once here there when where why how all any both each few more most other some such no nor not only own same so
than too very s t can will just don should now
"""
STOP = frozenset(_STOP_WORDS.split())


# Irregular forms, which a stemmer cannot join: a question asks "when did kyle go",
# the turn said "kyle went". A query word of a family matches every form of it
# (store/search.py), as porter joins "deploy" and "deployed". Forms that are as often
# another word ("rose", "lead", "spring", "wound", "drew") are left out.
_FAMILIES = """
arise arose arisen|awake awoke awoken|become became|begin began begun|bend bent|bite bitten|bleed bled|blow blew blown
break broke broken|breed bred|bring brought|build built|burn burnt|buy bought|catch caught|choose chose chosen
cling clung|come came|creep crept|dig dug|draw drawn|dream dreamt|drink drank drunk|drive drove driven|eat ate eaten
fall fell fallen|feed fed|feel felt|fight fought|find found|flee fled|fling flung|fly flew flown|forbid forbade forbidden
forget forgot forgotten|forgive forgave forgiven|freeze froze frozen|get got gotten|give gave given|go went gone
grow grew grown|hang hung|hear heard|hide hid hidden|hold held|keep kept|kneel knelt|know knew known|lay laid
leap leapt|learn learnt|leave left|lend lent|lose lost|make made|meet met|pay paid|prove proven|rebuild rebuilt
redo redid redone|rewrite rewrote rewritten|ride rode ridden|rise risen|run ran|say said|see saw seen|seek sought
sell sold|send sent|sew sewn|shake shook shaken|shine shone|shoot shot|show shown|shrink shrank shrunk|sing sang sung
sit sat|sleep slept|slide slid|speak spoke spoken|speed sped|spend spent|spin spun|stand stood|steal stole stolen
sting stung|stink stank stunk|stride strode|strike struck|strive strove striven|swear swore sworn|sweep swept
swim swam swum|swing swung|take took taken|teach taught|tell told|think thought|throw threw thrown
understand understood|undo undid undone|wake woke woken|wear wore worn|weave wove woven|weep wept|win won
withdraw withdrew withdrawn|wring wrung|write wrote written|child children|person people|man men|woman women
mouse mice|foot feet|tooth teeth|goose geese
"""
FORMS = {
    form: family
    for family in (tuple(line.split()) for line in _FAMILIES.replace("\n", "|").split("|") if line.strip())
    for form in family
}


def forms(word: str) -> tuple[str, ...]:
    """The word and its irregular forms (the word first), or the word alone."""
    family = FORMS.get(word)
    return (word, *(f for f in family if f != word)) if family else (word,)


def words(text: str) -> list[str]:
    """Every word of `text`, casefolded, clitics cut."""
    return _WORD.findall(_CLITIC.sub("", text).casefold())


def query_words(text: str) -> list[str]:
    """The content words of a query, each once, in order, at most MAX_TERMS."""
    kept: dict[str, None] = {}
    for word in words(text):
        if word not in STOP:
            kept.setdefault(word)
            if len(kept) == MAX_TERMS:
                break
    return list(kept)


def passages(text: str, most: int = PASSAGE_WORDS) -> list[tuple[int, int]]:
    """(start, length) of each passage of `text`: runs of at most `most` words that
    cover it end to end, each cut after a line break when one falls in its second half."""
    if len(text.split(None, most)) <= most:  # most turns: one passage, found without the regex
        return [(0, len(text))]
    spans = [(m.start(), m.end()) for m in _SPAN.finditer(text)]
    cut: list[tuple[int, int]] = []
    first = 0
    while first < len(spans):
        end = min(len(spans), first + most)
        if end < len(spans):
            for last in range(end - 1, first + most // 2, -1):
                if "\n" in text[spans[last][0] : spans[last][1]]:
                    end = last + 1
                    break
        start = 0 if first == 0 else spans[first][0]
        stop = len(text) if end == len(spans) else spans[end][0]
        cut.append((start, stop - start))
        first = end
    return cut
