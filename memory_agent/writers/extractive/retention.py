"""The retention policy of the extractive writer: which memory an app at its cap can best do
without.

Memories are ranked from least to most worth keeping:

1. a memory that holds no fact (no value such as a name, a number, a date or a code, and no
   word of a lasting kind);
2. a memory every fact of which a newer memory supersedes (a new value of the same thing:
   "my budget is now 150" after "my budget is 120", "ahora pago 900 de alquiler" after "el
   alquiler es de 850");
3. a memory whose facts a newer memory repeats;
4. a memory some facts of which a newer memory supersedes: the two are merged into one (the
   seed's EDIT: "update content"), without the superseded sentences;
5. otherwise nothing can go without loss, so two memories are merged into one when they fit
   within the length limit ("merge with another"), those on one topic and the shortest first;
6. failing that, the memory with the fewest facts goes, the oldest first (FIFO among equals).

A memory's importance (0-10, 5 when unset; an operator's or an app's judgement) weighs first
where a memory must go: among the lossless deletes of one tier, and in step 6, the least
important goes first; then the one cited by fewer replies (`recall.usage`; the new memory,
which no reply could cite yet, never counts as the least cited). A model's delete of a memory
more important than the policy's choice is overruled. Pinned memories are not candidates at
all (`compaction` leaves them out), and a memory is merged only with one of the same known
sensitivity (a private one never with one that is injected, a secret one never with one a
model is shown).

The model's decision is checked against this ranking, and rejected only when it can be shown
to lose something: a delete is applied unless its target holds facts no other memory has
while something could go without loss (tiers 1-3, or a merge that fits); an edit is applied
when its new text says only what the two memories said and keeps every value that is not
superseded. Otherwise the policy's own choice is applied and the reason recorded.

This is the extractive writer's policy; the model writer reads none of it
(`model_compaction`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from memory_agent.writers.extractive import facts, value_changes, values
from memory_agent.writers.extractive.words import text, written_forms
from memory_agent.writers.steps import NEW_MEMORY_ID, Candidate, Step, mergeable

MAX_MERGED_SENTENCES = 4


@dataclass(frozen=True)
class Assessment:
    candidate: Candidate
    tier: int  # 0: no fact, 1: superseded, 2: repeated, 3: holds facts
    value: int
    why: str


def assess(memories: Sequence[Candidate]) -> list[Assessment]:
    """Each memory (oldest first) with how much it is worth keeping."""
    assessed = []
    for index, memory in enumerate(memories):
        newer = memories[index + 1 :]
        value = facts.fact_value(memory.content)
        if value == 0:
            assessed.append(Assessment(memory, 0, 0, "it holds no fact"))
        elif newer and _superseded(memory.content, [m.content for m in newer]):
            assessed.append(Assessment(memory, 1, value, "a newer memory updates its facts"))
        elif any(repeats(memory.content, m.content) for m in newer):
            assessed.append(Assessment(memory, 2, value, "a newer memory repeats its facts"))
        else:
            assessed.append(Assessment(memory, 3, value, "it holds facts no other memory has"))
    return assessed


def choose(
    memories: Sequence[Candidate], *, max_chars: int, assessed: list[Assessment] | None = None
) -> Step:
    """The policy's step for memories (oldest first, the new one last) one over the cap;
    `assessed` is `assess(memories)` when the caller has it already."""
    assessed = assess(memories) if assessed is None else assessed
    position = {a.candidate.id: index for index, a in enumerate(assessed)}
    doomed = min(
        (a for a in assessed if a.tier < 3),
        key=lambda a: (a.tier, a.candidate.importance, a.candidate.use, position[a.candidate.id]),
        default=None,
    )
    if doomed is not None:
        return Step("delete", doomed.candidate.id, f"memory {_label(doomed)}: {doomed.why}")
    merge = _best_merge(memories, max_chars=max_chars)
    if merge is not None:
        return merge
    poorest = min(
        assessed,
        key=lambda a: (a.candidate.importance, a.value, a.candidate.use, position[a.candidate.id]),
    )
    return Step(
        "delete",
        poorest.candidate.id,
        f"every memory holds facts and none fit together; memory {_label(poorest)} is of the "
        "least importance, holds the fewest facts, and is the oldest of those",
    )


def review(
    memories: Sequence[Candidate], proposed: Step, *, max_chars: int
) -> tuple[Step, str | None]:
    """The model's step if the policy accepts it, else the policy's, with why it was
    overruled."""
    by_id = {m.id: m for m in memories}
    assessed = assess(memories)
    policy = choose(memories, max_chars=max_chars, assessed=assessed)
    if proposed.action == "delete":
        ranks = {a.candidate.id: a for a in assessed}
        target = ranks[proposed.target]
        chosen = ranks.get(policy.target) if policy.action == "delete" else None
        if chosen is not None and target.candidate.importance > chosen.candidate.importance:
            return policy, (
                f"overruled: memory {_label(target)} is of importance "
                f"{target.candidate.importance}, above {chosen.candidate.importance}; "
                f"{policy.reason}"
            )
        if target.tier < 3 or _loss_accepted(assessed, ranks[policy.target], policy):
            return proposed, None
        return policy, (
            f"overruled: memory {_label(target)} holds facts no other memory has; "
            f"{policy.reason}"
        )
    edited, folded = by_id[proposed.target], by_id[proposed.folded or NEW_MEMORY_ID]
    if not mergeable(edited, folded):
        return policy, (
            "overruled: the edit would merge memories of different sensitivity; "
            f"{policy.reason}"
        )
    missing = _facts_lost(edited.content, folded.content, proposed.new_content or "")
    if missing:
        return policy, f"overruled: the edit drops {', '.join(sorted(missing))}; {policy.reason}"
    source = text.vocabulary(edited.content + " " + folded.content)
    if not all(facts.is_grounded(s, source) for s in text.sentences(proposed.new_content or "")):
        return policy, f"overruled: the edit says what neither memory said; {policy.reason}"
    return proposed, None


def _loss_accepted(assessed: Sequence[Assessment], chosen: Assessment, policy: Step) -> bool:
    """A delete of facts no other memory holds is wrong while a memory that holds no fact, or
    only superseded or repeated ones, is there, and stands when nothing could go without loss
    (the policy too would delete facts)."""
    if any(a.tier < 3 for a in assessed):
        return False
    return policy.action == "delete" and chosen.tier == 3


def _facts_lost(target: str, folded: str, merged: str) -> set[str]:
    """Values of either memory that the merged text lacks, but for those the new one updates."""
    kept = text.vocabulary(merged)
    wanted = text.values(folded)
    stale = stale_sentences(target, folded)
    for sentence in text.sentences(target):
        if sentence not in stale:
            wanted |= text.values(sentence)
    return {value for value in wanted if value not in kept and value.lower() not in kept}


def refresh(memories: Sequence[Candidate]) -> list[Step]:
    """Steps that retire what the newest memory (the last) updates in older ones: a memory
    all of whose facts it updates is deleted, one with some is edited to drop those
    sentences. This runs whether or not the app is at its cap, so a stale value never
    stands beside its update."""
    newest = memories[-1]
    steps = []
    # A reference the newest names that an older memory names too tells which record it
    # speaks of: it updates no memory of another reference ("the outbound flight EZY 6417 now
    # departs at 09:35" says nothing of the flight home, EZY 6432).
    named_records = facts.issued_codes(newest.content)
    its_record = {
        older.id for older in memories[:-1] if facts.issued_codes(older.content) & named_records
    }
    for older in memories[:-1]:
        if older.sensitivity == "unknown":
            continue  # never read: its sentences would be named in the step's reason
        if its_record and older.id not in its_record and facts.issued_codes(older.content):
            continue
        sentences = list(text.sentences(older.content))
        stale = stale_sentences(older.content, newest.content)
        if not stale:
            continue
        elsewhere = values_elsewhere(memories, older.id)
        reason = f"memory {_id(newest.id)} updates " + "; ".join(s[:80] for s in stale)
        for index, sentence in enumerate(sentences):
            if sentence not in stale:
                continue
            replaced = value_changes.replaced_values(sentence, newest.content)
            codes = {v.value for v in values.keyed_values(sentence) if v.kind == "code"}
            if codes - replaced <= elsewhere:
                sentences[index] = ""
            else:
                # It holds a reference no other memory has (an order, in a long quote): only
                # the clauses of the old values go, if any can. Names and the rest go with the
                # sentence, as the value rules judge it.
                sentences[index] = without_clauses_of(sentence, replaced, elsewhere)
        kept = " ".join(s for s in sentences if s)
        if kept == older.content:
            continue
        if not kept or not facts.fact_value(kept):
            steps.append(Step("delete", older.id, reason))
        else:
            steps.append(Step("edit", older.id, reason, kept))
    return steps


def values_elsewhere(memories: Sequence[Candidate], but: int) -> set[str]:
    """The values the memories other than memory `but` hold."""
    return {
        value.value
        for memory in memories
        if memory.id != but
        for value in values.keyed_values(memory.content)
    }


_BRACKETS = "()[]{}"


def without_clauses_of(sentence: str, replaced: frozenset[str], elsewhere: set[str]) -> str:
    """The sentence without its clauses that hold a replaced value (not a name alone: a name
    is replaced wherever the newer text names anyone else) and no value of their own that no
    other memory holds, each left out as "…" (its quotation marks kept): "dat staat elke dag
    om 05:30 klaar," in a long quote of a drive's stops. A clause that stays (the first, or
    one with a value of its own) loses the replaced values written in digits, each left out
    as "…" (the first clause only those `value_changes.distinctive`): "reminders by SMS go to
    601 442 913" keeps what goes by SMS, not the old number."""
    kept: list[str] = []
    for index, clause in enumerate(text.clauses(sentence)):
        keyed = values.keyed_values(clause)
        said = {v.value for v in keyed}
        if (
            index
            and not any(mark in clause for mark in _BRACKETS)
            and any(v.value in replaced and v.kind != "name" for v in keyed)
            and said - replaced <= elsewhere
        ):
            marks = "".join(char for char in clause if char in text.QUOTE_MARKS)
            if not kept or not kept[-1].startswith("…"):
                kept.append(f"…{marks}")
            else:
                kept[-1] += marks
            continue
        # The first clause says who said it and of what; a bracket left open misleads. Only a
        # value that is one thing wherever it is said leaves it ("SMS to 601 442 913"): a
        # change announced ties a sentence's every value of the replaced kind.
        for value in {
            v.value
            for v in keyed
            if v.value in replaced and v.kind != "name" and (index or value_changes.distinctive(v))
        }:
            clause = written_forms.written_in_digits(value).sub("…", clause)
        kept.append(clause)
    return " ".join(kept)


def stale_sentences(older: str, newer: str) -> list[str]:
    """The fact-bearing sentences of `older` that `newer` gives a new value for."""
    return list(_stale_sentences(older, newer))


# A decision compares the same memories pairwise several times (ranking them, then looking
# for a merge): each pair is worked out once.
@functools.lru_cache(maxsize=4096)
def _stale_sentences(older: str, newer: str) -> tuple[str, ...]:
    old_people, new_people = text.titled_names(older), text.titled_names(newer)
    if old_people and new_people and not old_people & new_people:
        return ()  # each speaks of another person: "la signora Mezzasalma", "il signor Pizzigoni"
    old_sentences = text.sentences(older)
    new_sentences = text.sentences(newer)
    updated = [
        sentence
        for i, sentence in enumerate(old_sentences)
        if facts.fact_value(sentence)
        and any(
            _updates(
                sentence,
                _context(old_sentences, i, same_value=True),
                later,
                _context(new_sentences, j, same_value=False),
            )
            for j, later in enumerate(new_sentences)
        )
    ]
    # The old values those sentences held are stale wherever the memory says them again
    # ("Tuesdays at 18:00 suit me" beside "the weekly session is on Tuesdays at 18:00"), in a
    # sentence that names nothing else (no name, code, amount) the newer text leaves standing.
    old_values = {v for sentence in updated for v in value_changes.replaced_values(sentence, newer)}
    return tuple(
        sentence
        for sentence in old_sentences
        if sentence in updated
        or (
            len(old_values) >= _REPEATED_VALUES
            and facts.fact_value(sentence)
            and _repeats_only_replaced(sentence, newer, old_values)
        )
    )


_IDENTIFYING = frozenset({"name", "code", "money", "percent"})
# How many of the old values a sentence must say again to be the same old fact ("Tuesdays at
# 18:00"): one alone is as often another thing at the same time, count or amount ("the gym
# class is at 9:30 too", "2 cats" beside "2 kids", a 1,200 € deposit beside the rent, a bag
# of 14,5 kg beside the dog's 14,5 kg).
_REPEATED_VALUES = 2


def _repeats_only_replaced(sentence: str, newer: str, old_values: set[str]) -> bool:
    said = values.keyed_values(sentence)
    replaced = value_changes.replaced_values(sentence, newer)
    return len({v.value for v in said} & old_values) >= _REPEATED_VALUES and not any(
        v.kind in _IDENTIFYING for v in said if v.value not in replaced
    )


def _context(sentences: Sequence[str], index: int, *, same_value: bool) -> str:
    """A sentence, with the one before it when it names no topic of its own: a value often
    follows its topic ("The landlord raised the rent. It's 1900 now."). With `same_value`,
    only when the two share a value ("Lisbon for ten days? ... Lisbon it is."), or when no
    word beside the sentence's values says what they are ("a rdv at the prefecture! On 12
    March at 9h40.")."""
    sentence = sentences[index]
    if not index or facts.topics(sentence):
        return sentence
    previous = sentences[index - 1]
    if (
        same_value
        and not text.values(previous) & text.values(sentence)
        and values.value_keys(sentence)
    ):
        return sentence
    return f"{previous} {sentence}"


def _superseded(older: str, newer: Sequence[str]) -> bool:
    """Every fact-bearing sentence of `older` is updated by some newer text."""
    bearing = [s for s in text.sentences(older) if facts.fact_value(s)]
    stale: set[str] = set()
    for later in newer:
        stale.update(stale_sentences(older, later))
    return bool(bearing) and all(sentence in stale for sentence in bearing)


def _updates(older: str, older_context: str, newer: str, newer_context: str) -> bool:
    """`newer` gives a new value for what `older` said: a value of the same kind beside the
    same words (`value_changes.gives_new_value`), another number for the same unit, or a new value
    on the same topic announced as a change ("now", "moved", "instead")."""
    if facts.subjects(newer) - facts.subjects(older_context):
        return False  # the new value is someone else's: a sister's home, a dog's medicine
    same_topic = bool(facts.shared_topics(older_context, newer_context))
    changed = facts.announces_change(newer_context)
    old_codes, new_codes = facts.issued_codes(older_context), facts.issued_codes(newer_context)
    if old_codes and new_codes and not old_codes & new_codes and (
        not changed or not _code_prefixes(old_codes) & _code_prefixes(new_codes)
    ):
        # Two references, two records: a second booking, not a new first one; and two
        # references of two issuers ("AQ-3316", "MC-2207") whatever is announced.
        return False
    if value_changes.gives_new_value(older_context, newer_context, changed=changed):
        return True  # any language: a value of the same kind beside the same words
    if facts.restates_a_number(older, newer) and (same_topic or changed):
        return True
    if facts.restates_a_number(older, newer, by_period=True) and (
        same_topic or (changed and not facts.topics(older_context))
    ):
        return True  # "$275 a day now" after "around $200 a day"
    if (
        changed
        and _owns_a_moment_in_both(older_context, newer_context)
        and _new_moment_or_amount(older, newer)
    ):
        return True  # "the MCAT on August 22" ... "rescheduled my MCAT: September 12"
    if not (same_topic and changed):
        return False
    if facts.issued_codes(older) and not facts.issued_codes(newer):
        # A record of something done, by its reference (an order, a booking), is not a value
        # of a topic: "now shops at Costco" does not undo "order FC-20931 was delivered".
        return False
    if _moments_not_given_anew(older, newer):
        # A time or an amount the newer text gives no other of is another thing's: a new
        # apartment "from 12 to 16 July" does not undo "the flight home goes at 19:05".
        return False
    # A new value of the kind the old one was: a name for a name, a number for a number.
    new_names = text.names(newer) - text.names(older)
    new_numbers = text.numbers(newer) - text.numbers(older)
    return bool((text.names(older) and new_names) or (text.numbers(older) and new_numbers))


# Values that a named thing can be moved or re-priced to; a bare number beside a name is as
# often another thing of that name ("69003 Lyon", "Lyon 2"), unless it has the same form as
# the old one (a postcode for a postcode: "69003 Lyon", "69007 Lyon").
_MOMENTS_AND_AMOUNTS = frozenset({"date", "time", "money", "percent"})


def _code_prefixes(codes: frozenset[str]) -> frozenset[str]:
    """Who issued the references ("aq" of "aq-3316")."""
    return frozenset(value_changes.code_series(code) for code in codes) - {""}


def _moments_not_given_anew(older: str, newer: str) -> bool:
    """`older` holds a time, an amount or a share of a kind `newer` holds none of."""
    new_kinds = {value.kind for value in values.keyed_values(newer)}
    return any(
        value.kind in _TIMES_AND_AMOUNTS and value.kind not in new_kinds
        for value in values.keyed_values(older)
    )


# Not dates: two texts give dates of many things at once ("from 12 to 16 July").
_TIMES_AND_AMOUNTS = _MOMENTS_AND_AMOUNTS - {"date"}


def _owns_a_moment_in_both(older: str, newer: str) -> bool:
    """A name stands beside a date, time, amount, share or number in both texts ("the MCAT on
    August 22", "my MCAT: September 12"): the thing those are of. A name both merely mention (the
    child every memory of a school app speaks of) ties nothing."""
    return bool((_moment_owners(older) & _moment_owners(newer)) - text.CALENDAR_NAMES)


def _moment_owners(text_: str) -> frozenset[str]:
    """The names beside a date, time, amount, share or number ("69003 Lyon")."""
    owners = values.owners(text_)
    kinds = (*_MOMENTS_AND_AMOUNTS, "number")
    return frozenset().union(*(owners.get(kind, frozenset()) for kind in kinds))


def _new_moment_or_amount(older: str, newer: str) -> bool:
    """`newer` gives a date, time, amount or share that `older` does not, and `older` holds
    one of the same kind; or a number of three digits or more as long as one of `older`'s."""
    old = {form for v in values.keyed_values(older) if (form := _form(v)) is not None}
    new = {form for v in values.keyed_values(newer) if (form := _form(v)) is not None}
    old_kinds = {kind for kind, _ in old}
    return any(kind in old_kinds for kind, _ in new - old)


def _form(value: values.KeyedValue) -> tuple[str, str] | None:
    if value.kind in _MOMENTS_AND_AMOUNTS:
        return value.kind, value.value
    if value.kind == "number" and value.value.isdigit() and len(value.value) >= 3:
        return f"{len(value.value)} digits", value.value
    return None


def repeats(older: str, newer: str) -> bool:
    """Whether `newer` says every fact of `older`: all its values, and most of its words."""
    old_values = text.values(older)
    if old_values and not old_values <= text.values(newer):
        return False
    words = text.content_words(older)
    return bool(words) and len(words & text.content_words(newer)) >= 0.8 * len(words)


def _best_merge(memories: Sequence[Candidate], *, max_chars: int) -> Step | None:
    """Fold a pair into one memory: an older memory with the newer one that updates part of
    it (dropping the stale sentences), else the shortest pair that fits, same topic first."""
    best: tuple[tuple[int, int], Step] | None = None
    for i, older in enumerate(memories):
        for newer in memories[i + 1 :]:
            if not mergeable(older, newer):
                continue  # a private memory's text must not reach an injected one
            sentences = text.sentences(older.content)
            stale = stale_sentences(older.content, newer.content)
            current = [s for s in sentences if s not in stale]
            kept = " ".join(current).rstrip()
            merged = f"{kept} {newer.content.lstrip()}".strip()
            if len(merged) > max_chars or len(text.sentences(merged)) > MAX_MERGED_SENTENCES:
                continue
            related = facts.same_topic(older.content, newer.content)
            rank = (0 if len(current) < len(sentences) else 1 if related else 2, len(merged))
            if best is None or rank < best[0]:
                reason = (
                    f"every memory holds facts; memories {_id(older.id)} and {_id(newer.id)} "
                    "fit together in one"
                )
                target, folded = (older, newer) if older.id != NEW_MEMORY_ID else (newer, older)
                best = (rank, Step("edit", target.id, reason, merged, folded.id))
    return best[1] if best else None


def _label(assessment: Assessment) -> str:
    return _id(assessment.candidate.id)


def _id(memory_id: int) -> str:
    return "new" if memory_id == NEW_MEMORY_ID else str(memory_id)
