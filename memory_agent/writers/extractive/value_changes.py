"""Whether a newer text gives another value of what an older one said, by the values both hold
and the words beside them (`values.keyed_values`), in any language: "the disk alert fires at
80%" and "the disk alert threshold is now 85%" give two values of one thing, so the newer
retires the older; "Bruno lives in Porto" and "Chloe lives in Quito" name different people."""

from __future__ import annotations

from memory_agent.core import patterns as re
from memory_agent.writers.extractive.values import (
    PEOPLE_KEYS,
    TITLE_KEYS,
    KeyedValue,
    keyed_values,
    small_count,
)
from memory_agent.writers.extractive.words import language


def gives_new_value(older: str, newer: str, *, changed: bool) -> bool:
    """`newer` gives another value of the same kind for the same thing as `older`: the words
    beside the two values share two keys, or one when `newer` announces a change. When the old
    value stands beside other values (who or what it belongs to: "Bruno lives in Porto",
    "Postgres 13"), the newer text must name one of them too ("Chloe lives in Quito" and
    "Redis 7" are other things)."""
    old_values = keyed_values(older)
    new_values = keyed_values(newer)
    new_identities = _identities(new_values)
    new_numbers = _identities(new_values, kinds=("number", "code"))
    for old in old_values:
        # The other words of its own name ("Chen" of "Marcus Chen") say nothing of whose the
        # name is.
        own_name = _own_name(old, old_values)
        others = _identities(old_values) - {old.value} - own_name
        if others and new_identities and not others & new_identities:
            continue  # each names something else: "Bruno lives in Porto", "Chloe in Quito"
        numbered = _identities(old_values, kinds=("number", "code")) - {old.value}
        if numbered and new_numbers and not numbered & new_numbers:
            continue  # another numbered thing: "code 0001 for locker 1", "locker 2"
        # Evidence that the two values are of one thing: shared keys, a change announced, and
        # another value both name (the same release, the same store); not a count of one or
        # two digits, which two texts share by chance ("2 adultes", a list's "2/").
        named_by_both = {v for v in others & new_identities if not small_count(v)}
        evidence = (1 if changed else 0) + (1 if named_by_both else 0)
        for new in new_values:
            if new.kind != old.kind or new.value == old.value:
                continue
            if old.kind == "date" and not _date_forms(old.value) & _date_forms(new.value):
                continue  # a month is no new value of a weekday: "el domingo", "noviembre"
            if old.unit and new.unit and old.unit != new.unit:
                continue  # another thing counted: "75 microgrammi" of one drug, "5 mg" of another
            shared = len(_shared_keys(old, new))
            if shared == 0 or shared + evidence < 2:
                continue
            if old.kind == "name" and not (changed and shared >= 2):
                # Another name beside the same words is as often another thing ("Priya owns
                # the payments service", "Tomasz owns the auth service"): only a change
                # announced makes it a new value.
                continue
            if new.keys & PEOPLE_KEYS and not old.keys & PEOPLE_KEYS:
                continue  # a value of someone else's: "my sister now lives in Denver"
            if old.value in new_identities and not changed:
                continue  # the old value is said again beside the new one: not replaced
            return True
    return False


def _own_name(value: KeyedValue, found: tuple[KeyedValue, ...]) -> frozenset[str]:
    """The words of the name `value` is one word of."""
    if value.name_group < 0:
        return frozenset()
    return frozenset(v.value for v in found if v.name_group == value.name_group)


def _shared_keys(one: KeyedValue, other: KeyedValue) -> frozenset[str]:
    """The words beside both values that may say what they are of. Words for people and
    titles say whose a value is, not what it is: two customers beside "signora" and "figlio"
    are two people, not one updated."""
    return (one.keys & other.keys) - PEOPLE_KEYS - TITLE_KEYS


def _date_forms(value: str) -> frozenset[str]:
    """What a date value names: a weekday, a month (both, for "mar": martes and March), or a
    day by its number, which may stand for either."""
    forms = {form for form, names in _DATE_NAMES.items() if value in names}
    return frozenset(forms or _DATE_NAMES)


# Weekdays and months as a date value gives them (their first three letters).
_DATE_NAMES = {
    field: frozenset(name[:3] for name in language.numbered(field, 0))
    for field in ("weekdays", "months")
}


def _identities(
    found: tuple[KeyedValue, ...],
    kinds: tuple[str, ...] = ("name", "code", "number", "percent", "money"),
) -> frozenset[str]:
    """The values that can say whose or what a value is (not dates and times: they say
    when)."""
    return frozenset(value.value for value in found if value.kind in kinds)


def replaced_values(older: str, newer: str, *, as_history: bool = False) -> frozenset[str]:
    """The values of `older` that `newer` may give a newer value for: those of a kind of which
    `newer` holds another value, and that `newer` does not repeat ("80 guests" beside "104
    guests", "Cabot Circus" beside "St David's"). Empty when `newer` cannot replace anything of
    `older`: a model's claim that it does is then shown wrong.

    With `as_history`, also a value `newer` repeats when it gives another of its kind, which
    `older` lacks, beside two of the same words ("van 8,5 naar elf procent", the fuel
    surcharge now 11%, after the fuel surcharge of 8,5%): a model may judge it the old value,
    said again as history; or a reference said again beside a new one of its series
    ("NB-0217 nicht überlebt … Ersatzgerät NB-0262"). Not a name: a name said again is as
    often whom both speak of."""
    old_values = keyed_values(older)
    new_values = keyed_values(newer)
    repeated = {value.value for value in new_values}
    new_kinds = {value.kind for value in new_values}
    old_said = {value.value for value in old_values}

    def history(old: KeyedValue) -> bool:
        return old.kind != "name" and any(
            new.kind == old.kind
            and new.value not in old_said
            and (len(new.keys & old.keys) >= 2 or _same_series(old, new))
            for new in new_values
        )

    # Not repeated, so any new value of its kind is another one.
    return frozenset(
        old.value
        for old in old_values
        if old.kind in new_kinds and (old.value not in repeated or (as_history and history(old)))
    )


# Digits enough that the same value twice is one thing: a phone number, an IP address, an
# ID ("NB-0217"); not "B12", "T2" or room "A204", nor 900 € of rent and 900 books.
_DISTINCTIVE_DIGITS = 5


_DISTINCTIVE_CODE_DIGITS = 4


def distinctive(value: KeyedValue) -> bool:
    """A value that, said twice, is one thing said twice."""
    digits = sum(char.isdigit() for char in value.value)
    if value.kind == "code":
        return digits >= _DISTINCTIVE_CODE_DIGITS
    return value.kind != "name" and digits >= _DISTINCTIVE_DIGITS


def code_series(code: str) -> str:
    """The letters a reference starts with ("nb" of "nb-0217", "ezy" of "ezy 6417"): who issued
    it, or what it numbers. Empty for one that starts with a digit."""
    match = _LETTERS.match(code)
    return match.group() if match else ""


_LETTERS = re.compile(r"[^\W\d_]+")


def _same_series(old: KeyedValue, new: KeyedValue) -> bool:
    return old.kind == new.kind == "code" and code_series(old.value) == code_series(new.value) != ""


def reissued(older: str, newer: str) -> bool:
    """`newer` names a reference of `older` again and gives another of its series ("NB-0217
    nicht überlebt … Ersatzgerät NB-0262"): it speaks of that record and of its successor."""
    old_codes = [v for v in keyed_values(older) if v.kind == "code"]
    new_codes = [v for v in keyed_values(newer) if v.kind == "code"]
    said_again = {v.value for v in new_codes} & {v.value for v in old_codes}
    return any(
        _same_series(old, new) and new.value not in said_again
        for old in old_codes
        if old.value in said_again
        for new in new_codes
    )
