"""A trusted model's claims that a new memory updates older ones, and what of them stands.

A claim is applied when the older memory holds a value of a kind the new one gives another
value of, tied to it (a word beside both, a topic, a change announced, or the name the new
value stands beside: `may_update`),
without losing a value that no other memory holds or a sentence that holds a fact
(`claimed_update`). The checks' own updates are `retention.refresh`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory_agent import facts, language, text, values, written_forms
from memory_agent.retention import Candidate, Step, values_elsewhere, without_clauses_of


def claimed_update(memories: Sequence[Candidate], target: int, reason: str) -> Step | None:
    """The step that applies a model's claim that the newest memory (the last) gives newer
    values of what memory `target` says, or None when the claim is shown wrong or cannot be
    applied without loss.

    A sentence of the target may go when it holds a value of a kind the newest memory gives
    another value of, and the two are tied: a word beside the values in both, a topic of
    both, a change the newest announces, the name its new value stands beside, or a
    reference said again beside its successor (`_tied_replaced_values`). It goes unless it
    holds another value that no other memory has; then only its clauses that hold nothing
    else go (`retention.without_clauses_of`). A sentence that names a replaced name again, whole, in
    another case goes too. With them go the target's sentences that hold no fact at all and
    speak of what it spoke of ("when its fixed, send it to the cabot circus store" beside
    "our Cabot Circus store"). A target left with no fact is deleted, else edited to what is
    left; with nothing that may go, the claim is refused.
    """
    newest = memories[-1]
    older = next((m for m in memories if m.id == target), None)
    if older is None or older is newest:
        return None
    elsewhere = values_elsewhere(memories, target)
    written = list(text.sentences(older.content))
    sentences = list(written)
    stale: list[str] = []
    replaced_names: set[str] = set()
    tied = [_tied_replaced_values(sentence, newest.content) for sentence in sentences]
    # A value of its own kind tied in one sentence is the same old value where the memory
    # says it again ("on 601 442 913", then in the user's words "SMS to 601 442 913, I never
    # read mail"). Not a short number or code: 900 € of rent and 900 books are two things,
    # and so are vitamin B12 and a B12 level.
    tied_values = {
        (v.kind, v.value)
        for sentence, replaced in zip(sentences, tied, strict=True)
        for v in values.keyed_values(sentence)
        if v.value in replaced and values.distinctive(v)
    }
    for index, sentence in enumerate(sentences):
        replaced = tied[index] | frozenset(
            v.value for v in values.keyed_values(sentence) if (v.kind, v.value) in tied_values
        )
        if replaced and {v.value for v in values.keyed_values(sentence)} - replaced <= elsewhere:
            stale.append(sentence)
            replaced_names |= _names_as_written(sentence, replaced)
        elif replaced:
            # It holds other facts too (a long quote): only its clauses of the old values go.
            sentences[index] = without_clauses_of(sentence, replaced, elsewhere)
    if not stale and sentences == written:
        return None
    # A sentence that names a replaced name again, whole, in words the value rules do not
    # read as one ("the cabot circus store" beside "our Cabot Circus store") goes too, unless
    # it holds a value no other memory has.
    stale += [
        sentence
        for sentence in sentences
        if sentence not in stale
        and any(_says(sentence, name) for name in replaced_names)
        and {v.value for v in values.keyed_values(sentence)} <= elsewhere
    ]
    spoken_of = text.content_words(" ".join(stale)) - _NOT_A_SUBJECT
    gone = [
        sentence
        for sentence in sentences
        if sentence in stale
        or (not facts.fact_value(sentence) and text.content_words(sentence) & spoken_of)
    ]
    kept = " ".join(sentence for sentence in sentences if sentence not in gone)
    if not kept or not facts.fact_value(kept):
        return Step("delete", target, reason)
    if kept == older.content:
        return None
    return Step("edit", target, reason, kept)


def _names_as_written(sentence: str, replaced: frozenset[str]) -> set[str]:
    """The replaced names of the sentence as it writes them, a name of several words whole
    ("cabot circus", "bank of america": function words between its words belong to it), in
    lower case."""
    found: set[str] = set()
    run: list[str] = []
    between: list[str] = []  # function words after the run, kept if the name goes on
    for word in [*text.WORD.findall(_plain(sentence)), ""]:
        if word and word[0].isupper() and text.stem(word) in replaced:
            run += [*between, word.lower()]
            between = []
        elif run and word.lower() in text.STOPWORDS:
            between.append(word.lower())
        elif run:
            found.add(" ".join(run))
            run, between = [], []
    return found


def _says(sentence: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", _plain(sentence).lower()) is not None


def _plain(sentence: str) -> str:
    """One apostrophe, and no possessive: "Jo’s Bar" and "jo's bar" name "Jo Bar" alike."""
    return re.sub(r"(?<=\w)'s\b", "", written_forms.normalise_text(sentence).replace("’", "'"))


# Words every memory shares: they do not tie one sentence to what another speaks of.
_NOT_A_SUBJECT = (
    text.TIME_WORDS
    | values.REPORTING_WORDS
    | values.GENERIC_WORDS
    | {text.stem(word) for word in language.words_of("user")}
)


def may_update(older: str, newer: str) -> bool:
    """Whether a model's claim that `newer` updates `older` could be applied: a sentence of
    `older` holds a value of a kind `newer` gives another value of, tied to it."""
    return any(_tied_replaced_values(s, newer) for s in text.sentences(older))


def _tied_replaced_values(sentence: str, newer: str) -> frozenset[str]:
    """The sentence's values `newer` may replace (`values.replaced_values`, an old value it
    says again as history included), when the two are tied: a word beside the values of
    both, a topic of both, a change `newer` announces, the name its new value stands beside,
    a reference of the sentence `newer` names again beside its successor, or one amount for
    another of its size; else none."""
    replaced = values.replaced_values(sentence, newer, as_history=True)
    tied = replaced and (
        facts.announces_change(newer)
        or _keys_meet(values.value_keys(sentence), values.value_keys(newer))
        or facts.shared_topics(sentence, newer)
        or _owner_named(sentence, newer, replaced)
        or values.reissued(sentence, newer)
        or _one_amount_for_another(sentence, newer, replaced)
        or _one_person_for_another(sentence, newer, replaced)
    )
    return replaced if tied else frozenset()


def _one_person_for_another(sentence: str, newer: str, replaced: frozenset[str]) -> bool:
    """The sentence names one person by a title, `newer` one other by the same title, in any
    words ("tez danışmanı Prof. Dr. Selim Aydın", "tezimi artık Doç. Dr. Elif Karaca
    yönetiyor"): nothing shows the model wrong that one took the other's place. Two people
    or more on either side tie nothing."""
    old, new = text.titled_people(sentence), text.titled_people(newer)
    if len(old) != 1 or len(new) != 1:
        return False
    (old_title, old_name), (new_title, new_name) = next(iter(old)), next(iter(new))
    return old_title == new_title and old_name != new_name and old_name in replaced


def _one_amount_for_another(sentence: str, newer: str, replaced: frozenset[str]) -> bool:
    """The sentence holds one amount of money (or one share), `newer` one other of the same
    size, in any words ("the deductible is $1,250", "pays the first $2,500 of any claim"):
    nothing shows the model wrong that one replaces the other. Amounts far apart are of two
    things (a rent of 1650 €, a gym membership of 45 €)."""
    for kind in _ONE_AT_A_TIME:
        old = [v.value for v in values.keyed_values(sentence) if v.kind == kind]
        new = [v.value for v in values.keyed_values(newer) if v.kind == kind]
        if len(old) == len(new) == 1 and old[0] in replaced and _near(old[0], new[0]):
            return True
    return False


# Kinds of value a thing has one of at a time, and that a model names in any words.
_ONE_AT_A_TIME = ("money", "percent")
# How far apart an old amount and its new one may be: a price, a budget or a fee rarely
# changes more than threefold.
_AT_MOST_APART = 3.0


def _near(old: str, new: str) -> bool:
    try:
        low, high = sorted((float(old), float(new)))
    except ValueError:
        return False
    return low > 0 and high / low <= _AT_MOST_APART


def _keys_meet(old: frozenset[str], new: frozenset[str]) -> bool:
    """A word beside the values of both, or one of four letters or more the start of the
    other ("plan" and "plann" of "planning"): a word in another form. Not three letters: "bus"
    starts "business", "car" "cardiology"."""
    return bool(old & new) or any(
        len(short) >= 4 and long.startswith(short)
        for one in old
        for other in new
        for short, long in ((one, other), (other, one))
    )


def _owner_named(sentence: str, newer: str, replaced: frozenset[str]) -> bool:
    """`newer` gives a value of a replaced kind beside the name it is the value of, and the
    sentence gives the old one beside that name too ("Postgres 13", "Postgres 15"); or the
    name is written in capitals, a thing's and not a person's, and the sentence names it
    anywhere ("a EC em 1,4" after "a condutividade (EC) … em 1,8"). A person both speak of
    is no tie ("swimming practice at 5pm" and "the bus picks up Max at 7:10"), nor a place
    both mention ("the flight to Lisbon", "the hotel in Lisbon")."""
    said = values.keyed_values(sentence)
    kinds = {value.kind for value in said if value.value in replaced}
    if "number" in kinds:
        kinds.add(values.SMALL_COUNT)  # a version as often as a count: the model judges
    new_owners = values.owners(newer)
    old_owners = values.owners(sentence)
    named = {value.value for value in said} & _written_in_capitals(sentence)
    return any(
        new_owners.get(kind, frozenset()) & (old_owners.get(kind, frozenset()) | named)
        for kind in kinds
    )


def _written_in_capitals(sentence: str) -> frozenset[str]:
    """The sentence's words written in capitals ("EC", "ADR"), as the value rules name them."""
    return frozenset(
        text.stem(word.lower())
        for word in text.WORD.findall(sentence)
        if len(word) >= 2 and word.isupper()
    )
