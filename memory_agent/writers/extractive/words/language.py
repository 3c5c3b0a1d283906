"""The few words of each language that the extractive writer's checks need, and nothing else.

The checks rest on what holds in any language: values (numbers, dates, amounts, codes,
versions, hosts, names), who stated or confirmed them, and which words a value stands beside
(what it is the value of). A handful of small word classes help where a value alone cannot
tell: who speaks of themselves ("I", "mi", "ich"), what an assistant says when it has done
something ("booked", "reservado", "gebucht"), what announces a change ("now", "ahora",
"jetzt"), and function words, which never name what a value is the value of.

The words are data: one file a language, `languages/<code>.toml`, each class a field of
`Words` (below), its words in lower case, separated by spaces ("_" joins a phrase's words).
Every class is the union over the languages (a sentence's language is never guessed). To add
a language, add its file: no code changes. Text in a language no file covers still gets every
check that rests on values alone. The model writer reads none of this.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from memory_agent.core import patterns as re
from memory_agent.writers.extractive.words.classes import WordClass

# A field of `Words` read by one rule, not a class of the language's words.
_RULES = {"read": False}


@dataclass(frozen=True)
class Words:
    # The language's name in English.
    name: str
    # Words by which a speaker speaks of themselves (pronouns, possessives, and in languages
    # that drop the pronoun, the commonest first-person verbs).
    first_person: str
    # A sentence starting with one of these and ending in "?" asks about the world.
    question: str
    # What an assistant says when it did something the user will want remembered.
    confirmation: str
    # What announces a new value of something.
    change: str
    # How people state a standing instruction.
    standing: str
    # Words that mark a lasting personal fact without a value (allergic, daughter, prefer).
    lasting: str
    # Function words: they never say what a value is the value of.
    stopwords: str
    # Days and months, which are values whatever their case; days also as they say "on
    # Tuesdays" ("terças", "montags", "sextas-feiras").
    calendar: str
    # People and animals other than the speaker: a value said of one of them is theirs.
    people: str = ""
    # Words about when, not what ("week", "semana", "Woche"): two texts sharing them do not
    # speak of the same thing, and they never say what a value is the value of.
    time: str = ""
    # What puts an end date to something ("remember it until Friday").
    until: str = ""
    # The twelve months and the seven days of the week (Monday first), in order; "|"
    # separates a name's other spellings.
    months: str = ""
    weekdays: str = ""
    # The numbers two to twenty written out, in order ("one" is as often an article: "un",
    # "ein"); "|" separates a number's other spellings. A word that is also an ordinary word or
    # a name in a covered language ("due", "once", "dos", "sei", "Otto") is left out in
    # `text.SPELLED_NUMBERS`.
    numbers: str = ""
    # "One" as an hour is named ("la una", "ein Uhr"), and the times of day said in words: each
    # a pattern ("_" a space, {h} the hour in words or digits, `?` what may be left out, <a|b>
    # a word one of which must come first), "=" the minutes it adds to that hour
    # ("quarter_past_{h}=15", Dutch "half_{h}=-30", 7:30 for "half acht"). Where the same words
    # also say a duration or a count ("una y media horas", "entre dez e quinze"), the pattern
    # starts with the word that says "at". A bare "half {h}" takes the hour in words only:
    # "half 8" is 8:30 in English and 7:30 in Dutch.
    one: str = ""
    clock: str = ""
    # Titles a person's name follows ("dr.", "signora"): the word after one is a name whatever
    # its case, and the title itself none. A title written with a full stop is an
    # abbreviation, whose full stop ends no sentence ("Dr. Hollis").
    titles: str = ""
    # The language capitalises every noun: in its text a capital letter does not mark a name.
    capitalises_nouns: bool = False
    # Greetings, thanks and goodbyes ("hi", "thanks", "bye"): a sentence of them and names
    # alone is chat, not a statement.
    greetings: str = ""
    # Today and tomorrow ("today", "tonight", "tomorrow"), and what a one-off errand asks
    # ("remind me", "add", "buy"): an errand for today or tomorrow is done by then, no memory.
    soon: str = ""
    errand: str = ""
    # False for a language written without spaces between words (Chinese, Japanese): its
    # entries match anywhere in a text.
    spaces: bool = True
    # True for a language whose words take endings joined to them (Korean, Turkish, Tamil):
    # its entries ending in "-" are stems, matched with any ending ("alerji-": "alerjim"),
    # and those starting with "-" endings, matched after any stem ("-yorum": "yaşıyorum").
    suffixes: bool = False

    # The words below are read by single rules, and count for no language when the writer
    # asks which language's file reads a text (`_RULES`).
    # How often: they make a stated habit lasting, but a question with them asks about the
    # world ("always", "daily").
    frequency: str = field(default="", metadata=_RULES)
    # What multiplies the number before it by a thousand ("77 grand", "40 mille").
    thousands: str = field(default="", metadata=_RULES)
    # Words of `numbers` that are an ordinary word or a name here ("due", "once", "Otto"):
    # never read as a number.
    not_numbers: str = field(default="", metadata=_RULES)
    # Units of the clock after a number ("7 pm", "20 minutes", "18 Uhr").
    time_units: str = field(default="", metadata=_RULES)
    # What a number measures or counts, after it ("3 days", "4 personnes").
    units: str = field(default="", metadata=_RULES)
    # A share after a number ("15 percent", "por ciento").
    percent: str = field(default="", metadata=_RULES)
    # Currencies' names after an amount ("950 dollars", "1450 złotych").
    currencies: str = field(default="", metadata=_RULES)
    # Abbreviations a number follows, whose full stop ends no sentence ("Nr. 4", "tel. 601").
    before_numbers: str = field(default="", metadata=_RULES)
    # Other abbreviations whose full stop ends no sentence, as written ("e.g.", "M.").
    abbreviations: str = field(default="", metadata=_RULES)
    # What stands before an ordinal date whose full stop ends no sentence ("am 3. Dezember").
    before_ordinals: str = field(default="", metadata=_RULES)
    # Articles elided before a word ("l'appartement", "dell'utente").
    elisions: str = field(default="", metadata=_RULES)
    # In a language that capitalises its nouns: what comes before a noun (so the capital is
    # no name's) and before a name ("mit Hermes").
    determiners: str = field(default="", metadata=_RULES)
    prepositions: str = field(default="", metadata=_RULES)
    # What comes right before a name written in lower case ("named rex").
    before_names: str = field(default="", metadata=_RULES)
    # The plainest question words, whose question often comes without its question mark.
    plain_questions: str = field(default="", metadata=_RULES)
    # Liking something, said by `liking_speakers` ("I love jazz", "we enjoy hiking").
    liking: str = field(default="", metadata=_RULES)
    liking_speakers: str = field(default="", metadata=_RULES)
    # What says someone has a condition named by its ending ("diagnosed with dyslexia"), and
    # something counted ("I've got five raised beds").
    having: str = field(default="", metadata=_RULES)
    owning: str = field(default="", metadata=_RULES)
    # Words too common in memories to tie two of them to one slot.
    generic: str = field(default="", metadata=_RULES)
    # Verbs a summary uses to report what was said; they need not appear in the conversation.
    reporting: str = field(default="", metadata=_RULES)
    # How a person is addressed ("signora", "Herr"): whose a value is, not what it is.
    forms_of_address: str = field(default="", metadata=_RULES)
    # What follows "grand" when it is an amount ("77 grand total").
    after_amounts: str = field(default="", metadata=_RULES)
    # What may stand between "until" and a date ("until the 5th", "hasta el 3").
    before_dates: str = field(default="", metadata=_RULES)
    # Function words of other languages that are content words here, or names: never a
    # function word ("son" is a child in English).
    never_stopwords: str = field(default="", metadata=_RULES)
    # Function words this language shares with others: they tell nothing of which language a
    # text is in.
    shared_stopwords: str = field(default="", metadata=_RULES)
    # Kinds of personal fact, each a small group of words that name the same slot (synonyms a
    # value's neighbours cannot match: "babysitter" and "nanny"); `many_valued` names the
    # kinds of which a person has several at once (pets, doctors).
    topics: dict[str, str] = field(default_factory=dict, metadata=_RULES)
    many_valued: str = field(default="", metadata=_RULES)
    # What names each sensitive field of a person's profile (`memory_agent.consent`): a fact
    # that holds one of these waits for the person's consent before the profile changes. A
    # language without this table cannot tell, and every profile change in it waits.
    sensitive: dict[str, str] = field(default_factory=dict, metadata=_RULES)


def _loaded(folder: Path) -> dict[str, Words]:
    """Every language file of `folder` (`<code>.toml`), by its code, in the order of their
    `rank` (a spelling two languages share counts as the first's; a file without one comes
    after those with one, by code)."""
    found: list[tuple[float, str, Words]] = []
    for path in sorted(folder.glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        rank = data.pop("rank", float("inf"))
        try:
            found.append((rank, path.stem, Words(**data)))
        except TypeError as error:
            raise ValueError(f"{path.name}: {error}") from None
    return {code: words for _, code, words in sorted(found, key=lambda item: item[:2])}


def _switched_off() -> frozenset[str]:
    """The codes of `MNEMOLOOP_LANGUAGES_OFF` (comma-separated): languages whose files are
    not read, as if the writer did not know them (how the floor is measured on a language it
    does not know)."""
    codes = os.environ.get("MNEMOLOOP_LANGUAGES_OFF", "")
    return frozenset(code.strip() for code in codes.split(","))


LANGUAGES: dict[str, Words] = {
    code: words
    for code, words in _loaded(Path(__file__).with_name("languages")).items()
    if code not in _switched_off()
}

# Words that are function words in one language and content in another ("son" is a child in
# English): never a stop word.


def entries_of(text: str) -> list[str]:
    """A class's words and phrases, separated by white space; "_" joins a phrase's words."""
    return [entry.replace("_", " ") for entry in text.split()]


def _uncovered(path: Path) -> dict[str, str]:
    """Words of languages no file covers yet, by field (`uncovered.toml`): a rule reads them
    with every language's."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    rules = {f.name for f in fields(Words) if not f.metadata.get("read", True)}
    unknown = set(data) - rules
    if unknown:
        raise ValueError(f"{path.name}: no such field of the rules: {', '.join(sorted(unknown))}")
    return data


_UNCOVERED = _uncovered(Path(__file__).with_name("uncovered.toml"))


def rule_words(field: str) -> frozenset[str]:
    """Every language's words of a field read by a rule (and those of languages no file
    covers yet), as written: a phrase's words apart by spaces."""
    return frozenset(
        entry
        for text in [*(getattr(words, field) for words in LANGUAGES.values()),
                     _UNCOVERED.get(field, "")]
        for entry in entries_of(text)
    )


def longest_first(entries: frozenset[str]) -> str:
    """The entries as alternatives of a pattern, the longest first (a phrase's words apart by
    any white space)."""
    return "|".join(
        re.escape(entry).replace(r"\ ", r"\s+")
        for entry in sorted(entries, key=lambda e: (-len(e), e))
    )


def numbered(field: str, first: int, *, of: Words | None = None) -> dict[str, int]:
    """Each spelling in an ordered class (`months`, `weekdays`, `numbers`) of every language,
    or of one, to its place in the order counted from `first`."""
    found: dict[str, int] = {}
    for words in [of] if of else LANGUAGES.values():
        for index, spellings in enumerate(getattr(words, field).split()):
            for spelling in spellings.split("|"):
                found.setdefault(spelling, first + index)
    return found


def words_of(field: str) -> frozenset[str]:
    """Every language's single words of one class, in lower case (not a stem: "alerji-")."""
    return frozenset(
        entry
        for words in LANGUAGES.values()
        for entry in entries_of(getattr(words, field))
        if " " not in entry and "-" not in (entry[0], entry[-1])
    )


def pattern_of(field: str) -> WordClass:
    """One class of every language: its words and phrases found whole (an entry of a language
    written without spaces anywhere; a stem of a suffixing language, "alerji-", with any
    ending; an ending, "-yorum", after any stem), case aside."""
    return class_of(field, [(words, getattr(words, field)) for words in LANGUAGES.values()])


def class_of(field: str, entries: Sequence[tuple[Words, str]]) -> WordClass:
    """A class of the entries (each language's, as `pattern_of` reads them); `field` names
    it in an error."""
    whole: set[str] = set()
    anywhere: set[str] = set()
    stems: set[str] = set()
    endings: set[str] = set()
    for words, text in entries:
        for entry in entries_of(text):
            if not words.spaces:
                anywhere.add(entry)
            elif words.suffixes and entry.endswith("-"):
                stems.add(entry[:-1])
            elif words.suffixes and entry.startswith("-"):
                endings.add(entry[1:])
            elif not _ENTRY.fullmatch(entry):
                raise ValueError(
                    f"{field}: {entry!r} is no word or phrase (letters, apostrophes and hyphens,"
                    " words apart by spaces)"
                )
            else:
                whole.add(entry)
    pattern = re.compile(_alternatives(anywhere), re.IGNORECASE) if anywhere else None
    return WordClass(whole, stems, endings, pattern)


# What an entry of a class read word by word is: words apart by single spaces.
_ENTRY = re.compile(r"[\w'’-]+(?: [\w'’-]+)*")


def _alternatives(entries: set[str]) -> str:
    """The entries as one alternation, matching the longest entry that fits (as entries
    sorted longest first would), a phrase's words apart by any white space. Written as a
    trie (the entries' shared beginnings factored out): a word class holds hundreds of
    entries, and a plain alternation is tried one entry after another at every position."""
    trie: _Trie = {}
    for entry in entries:
        node = trie
        for char in entry:
            node = node.setdefault(char, {})
        node[_END] = {}
    return _trie_pattern(trie)


# A trie of entries: each character leads to the entries that go on with it; `_END` marks
# where an entry ends.
_Trie = dict[str, "_Trie"]
_END = ""


def _trie_pattern(node: _Trie) -> str:
    """A trie node as a pattern: its branches, each a character and what follows; optional
    (greedy, so the longer entry is tried first) where an entry also ends here."""
    branches = [
        (r"\s+" if char == " " else re.escape(char)) + _trie_pattern(child)
        for char, child in sorted(node.items())
        if char != _END
    ]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if _END in node else body


def found_in(pattern: WordClass, text: str) -> frozenset[str]:
    """What a class's pattern finds in a text, in lower case: the words of a class in any
    language, joined to their endings or not."""
    return frozenset(match.lower() for match in pattern.findall(text))


FIRST_PERSON = pattern_of("first_person")
CONFIRMATION = pattern_of("confirmation")
CHANGE = pattern_of("change")
STANDING = pattern_of("standing")
# The classes read where a text's words are not cut apart by spaces in every language: found
# by pattern, with `found_in`.
LASTING_FOUND = pattern_of("lasting")
PEOPLE_FOUND = pattern_of("people")
QUESTION_FOUND = pattern_of("question")
GREETINGS = pattern_of("greetings")
SOON = pattern_of("soon")
ERRAND = pattern_of("errand")
TITLES = frozenset(title.rstrip(".") for title in words_of("titles"))
ABBREVIATED_TITLES = frozenset(title[:-1] for title in words_of("titles") if title.endswith("."))
QUESTION_STARTS = words_of("question")
CALENDAR = words_of("calendar")
PEOPLE = words_of("people")
TIME = words_of("time")
STOPWORDS = words_of("stopwords") - rule_words("never_stopwords")
# Function words of languages that capitalise every noun: in their text a capital letter does
# not mark a name.
NOUN_CAPITALISING = frozenset(
    entry
    for words in LANGUAGES.values()
    if words.capitalises_nouns
    for entry in entries_of(words.stopwords)
) - rule_words("shared_stopwords")
# The words read by single rules (`Words`' fields after `suffixes`).
FREQUENCY = rule_words("frequency")
THOUSANDS = rule_words("thousands")
NOT_NUMBERS = rule_words("not_numbers")
TIME_UNITS = rule_words("time_units")
UNITS = rule_words("units")
PERCENT = rule_words("percent")
CURRENCIES = rule_words("currencies")
BEFORE_NUMBERS = rule_words("before_numbers")
ABBREVIATIONS = rule_words("abbreviations")
BEFORE_ORDINALS = rule_words("before_ordinals")
ELISIONS = rule_words("elisions")
DETERMINERS = rule_words("determiners")
PREPOSITIONS = rule_words("prepositions")
BEFORE_NAMES = rule_words("before_names")
PLAIN_QUESTIONS = rule_words("plain_questions")
LIKING = rule_words("liking")
LIKING_SPEAKERS = rule_words("liking_speakers")
HAVING = rule_words("having")
OWNING = rule_words("owning")
GENERIC = rule_words("generic")
REPORTING = rule_words("reporting")
FORMS_OF_ADDRESS = rule_words("forms_of_address")
AFTER_AMOUNTS = rule_words("after_amounts")
BEFORE_DATES = rule_words("before_dates")
MANY_VALUED = rule_words("many_valued")
# What multiplies a number by a thousand as a language that capitalises its nouns writes it
# ("80 Tausend").
CAPITALISED_THOUSANDS = frozenset(
    entry.capitalize()
    for words in LANGUAGES.values()
    if words.capitalises_nouns
    for entry in entries_of(words.thousands)
)
TOPICS: dict[str, frozenset[str]] = {}
for _words in LANGUAGES.values():
    for _topic, _members in _words.topics.items():
        TOPICS[_topic] = TOPICS.get(_topic, frozenset()) | frozenset(_members.split())
