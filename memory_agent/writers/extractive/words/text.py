"""Text as the memory checks read it: sentences, words and their stems, numbers, names.

Every function reads text as `written_forms` normalises it (NFKC, invisible format characters
removed), so that look-alike and zero-width characters cannot hide a word from a check.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from types import MappingProxyType

from memory_agent.core import patterns as re
from memory_agent.core.sentences import sentences_of
from memory_agent.core.unicode_forms import normalise_text
from memory_agent.writers.extractive.words import language
from memory_agent.writers.extractive.words.written_forms import cached as _cached
from memory_agent.writers.extractive.words.written_forms import reading_form

# A word may hold digits (B12, 6b, Alice2): only a token of digits alone is a number. Letters
# are any script's.
WORD = re.compile(r"[^\W_]*[^\W\d_][\w'’\-]*|\d[\d,.:]*\d|\d")


# A sentence ends at . ! or ? and the quotes or brackets that close with it.
# A title's full stop ends no sentence ("Dr. Hollis", "Dra. Lemos", "M. et Mme Moreau"), nor
# an initial's ("J. K. Rowling"), nor a common abbreviation's ("ca.", "z. B."), nor a date's
# ("15.04. um 10 Uhr").
TITLES = (
    "".join(
        rf"(?<!\b{title[0].upper()}{re.escape(title[1:])}\.)"
        # In lower case too ("u dr. Kowalczyka"), but "40 ms." is milliseconds.
        + ("" if title == "ms" else rf"(?<!\b{re.escape(title)}\.)")
        for title in sorted(language.ABBREVIATED_TITLES)
    )
    # Abbreviations, as written: "Doç. Dr.", French "M." before a name, "ca. 5.000 €", "Nr. 4",
    # "approx. 20", "p. ex." (`language.ABBREVIATIONS`); and of one letter: "z. B.", "d. h.".
    + "".join(rf"(?<!\b{re.escape(word)})" for word in sorted(language.ABBREVIATIONS))
    + r"(?<!\b[a-z]\.)(?<!\b[a-z]\.\s[A-Z]\.)"
    # Initials: one before another ("J. K."), and the second of two ("K. Rowling"); a lone
    # capital may end a sentence ("Plan B. Then").
    r"(?!(?<=\b[A-Z]\.)\s+[A-Z]\.)(?<!\b[A-Z]\.\s[A-Z]\.)"
    # An ordinal after its preposition or article ("am 3. Dezember", "im 2. OG").
    + "".join(
        rf"(?<!\b{word} \d\.)(?<!\b{word} \d\d\.)" for word in sorted(language.BEFORE_ORDINALS)
    )
)


# A date's full stop ends no sentence either ("15.04. um 10 Uhr").
_KEPT_TOGETHER = TITLES + r"(?<!\d\.\d\d\.)"


# Names that need no capital letter: the word after a title or after "name is", days and
# months.
_GIVEN_NAME = re.compile(
    rf"\b(?:{language.longest_first(language.BEFORE_NAMES)})\s+([a-z][a-z'-]+)", re.I
)
_TITLE = "|".join(sorted(language.TITLES, key=len, reverse=True))
# The title next to the name, after any others ("Prof. Dr. Selim Aydın": "dr", "selim").
_TITLED_NAME = re.compile(
    rf"\b(?:(?:{_TITLE})\.?\s+)*({_TITLE})\.?\s+(?!(?:{_TITLE})\b)([^\W\d_][\w'-]+)", re.I
)


def titled_names(text: str) -> frozenset[str]:
    """The names a title stands before ("signora Mezzasalma", "Dr. Patel"): people."""
    return frozenset(name for _, name in titled_people(text))


def titled_people(text: str) -> frozenset[tuple[str, str]]:
    """Each title and the name it stands before, in lower case, the name stemmed."""
    return frozenset(
        (title.lower(), stem(name)) for title, name in _TITLED_NAME.findall(normalise_text(text))
    )


# Capitals inside a word or a word in capitals: a name or an acronym in any language (DHL,
# PostgreSQL, iPhone).
_INNER_CAPITAL = re.compile(r"^(?:[^\W\d_]+[A-Z][\w-]*|[A-Z]{2,}[\w-]*)$")


STOPWORDS = language.STOPWORDS
# Capitalised words that are no names: titles (the name follows them) and days and months
# (taken by their first three letters, whatever their case).
_NOT_NAMES = STOPWORDS | language.CALENDAR | language.TITLES


_CALENDAR_WORD = re.compile(
    r"(?<![\w'’])(" + "|".join(sorted(language.CALENDAR, key=len, reverse=True)) + r")(?![\w'’])",
    re.I,
)
# Days and months as `names` gives them (their first three letters): a date is no one's name.
CALENDAR_NAMES = frozenset(word[:3] for word in language.CALENDAR)


def is_calendar_word(word: str) -> bool:
    """A day or a month in any covered language, in any case."""
    return word.lower() in language.CALENDAR


# How often: they make a stated habit lasting, but a question with them asks about the world.
FREQUENCY = language.FREQUENCY


@_cached
def sentences(text: str) -> tuple[str, ...]:
    """The text's sentences, as `sentences_of` cuts them, a title's, an initial's and a date's
    full stop ending none, each joined to the one before where a period only seemed to end it
    (an ordinal date, an abbreviation before a number)."""
    return tuple(rejoined(sentences_of(normalise_text(text), kept_together=_KEPT_TOGETHER)))


def rejoined(parts: Iterable[str]) -> list[str]:
    """The non-blank parts of a text cut at each sentence end, each joined to the one before
    where a period only seemed to end it (`_goes_on`)."""
    found: list[str] = []
    for part in parts:
        if not part.strip():
            continue
        if found and _goes_on(found[-1].strip(), part.strip()):
            found[-1] = f"{found[-1]} {part}"
        else:
            found.append(part)
    return found


def _goes_on(before: str, after: str) -> bool:
    """`after` continues the sentence a period only seemed to end: an ordinal date ("lørdag
    21. juni", "19. yüzyıl") or an abbreviation before a number ("kl. 18:00")."""
    return bool(
        (after[0].islower() and _ENDS_IN_ORDINAL.search(before))
        or (after[0].isdigit() and _ENDS_IN_ABBREVIATION.search(before))
    )


_ENDS_IN_ORDINAL = re.compile(r"(?<![\d.,:])\d{1,2}\.$")
# Abbreviations a number follows: "kl. 18:00", "nr. 4", "godz. 9", "tel. 601", "ul. 12".
_ENDS_IN_ABBREVIATION = re.compile(
    rf"(?<!\w)(?:{language.longest_first(language.BEFORE_NUMBERS)})\.$", re.I
)


def clauses(sentence: str) -> tuple[str, ...]:
    """The sentence cut after each comma, semicolon or colon followed by a space (a number's
    "14,5" or "11:30" stays whole); joined with spaces they give the sentence back."""
    return tuple(part for part in _CLAUSE_END.split(sentence) if part)


_CLAUSE_END = re.compile(r"(?<=[,;:])\s+")
QUOTE_MARKS = "\"“”«»„"


_ELISION = re.compile(rf"^(?:{language.longest_first(language.ELISIONS)})'(?=\w)")


@lru_cache(maxsize=4096)
def stem(word: str) -> str:
    word = word.lower().replace("’", "'")
    for suffix in ("'s", "'"):
        word = word.removesuffix(suffix)
    word = _ELISION.sub("", word)  # l'appartement, d'abord, j'habite
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


# Words about when, not what: two texts sharing them do not speak of the same thing. In the
# forms `stem` gives too, since the checks compare stems.
TIME_WORDS = language.TIME | frozenset(stem(word) for word in language.TIME)


# Numbers written out ("cinco kilómetros"): a source that says them grounds "5 km". Not those
# that are also a common word of another language or a name: English "due" and "once",
# Portuguese "dos" and "sei", "seize", "sept", "doce", "dez" (German "Dez."), "Otto", "venti".
SPELLED_NUMBERS = {
    word: str(n)
    for word, n in language.numbered("numbers", 2).items()
    if word not in language.NOT_NUMBERS
}
# Counts written out that give a slot its number ("two kids"): English only, since other
# languages' number words are often another's function words (Portuguese "dos"); up to
# twelve, as before the classes held more.
COUNT_WORDS = {
    word: str(n)
    for word, n in language.numbered("numbers", 2, of=language.LANGUAGES["en"]).items()
    if n <= 12
}


# Where something lives or who gets it, written as such in any language: a path from the root
# or home (/srv/app/), a path with a placeholder (runbooks/<service>/), a path down to a file
# (deploy/helm/values.yaml), a channel or a handle with a separator or a digit in its name
# (#ops-alerts, @dana_k). Not words joined by slashes ("yes/no/maybe", "Kaffee/Tee"), nor a
# tag or a mention that is one plain word ("#summer", "@home").
# Each path starts where no path character stands before it: a match never starts inside a
# longer run, so a long run of such characters is read once, not from each of its positions.
_REFERENCE = re.compile(
    r"(?<![\w/~.<>-])~?/[\w.<>-]*\w[\w.<>-]*(?:/[\w.<>-]+)*/?"
    r"|(?<![\w./<>-])[\w.-]+(?:/[\w.<>-]+)*/<[\w-]+>(?:/[\w.<>-]*)*"
    r"|(?<![\w./-])[\w.-]+(?:/[\w.-]+)+\.[^\W\d_][^\W_]{0,3}\b"
    r"|(?<![\w#@])[#@][^\W\d_]\w*?(?:[-_.]\w+|\d\w*)+"
)


@_cached
def references(text: str) -> frozenset[str]:
    """The text's paths, files, channels and handles, in lower case."""
    found = (m.group().lower().rstrip("/.") for m in _REFERENCE.finditer(normalise_text(text)))
    return frozenset(reference for reference in found if any(ch.isalnum() for ch in reference))


# Words that multiply the number before them by a thousand ("77 grand", "40 mille", "12 mila",
# "80 Tausend"), in lower case as they follow a number ("the 2025 Grand Prix" is no amount);
# "77k" says it in any language. Not "mil": a million in English chat, a thousand in Spanish.
THOUSANDS = language.THOUSANDS
CAPITALISED = language.CAPITALISED_THOUSANDS
_IN_THOUSANDS = re.compile(
    r"(?<![\w.,])(\d+(?:[.,]\d+)?)(?:\s?(?:"
    + language.longest_first(THOUSANDS | CAPITALISED)
    + r")|[kK])\b(?!\s+[A-Z])"
)
IN_THOUSANDS_K = re.compile(r"\d+(?:[.,]\d+)?k", re.I)


@_cached
def numbers(text: str) -> frozenset[str]:
    return frozenset(number_value(n) for n in re.findall(r"\d[\d,.:]*", reading_form(text)))


def amounts_in_thousands(text: str) -> frozenset[str]:
    """Amounts given in thousands, as whole numbers ("77 grand", "77k": 77000): a source
    that says them grounds "$77,000"."""
    return frozenset(in_thousands(n) for n in _IN_THOUSANDS.findall(text))


def in_thousands(raw: str) -> str:
    """The whole amount of a number of thousands: 77 -> 77000, 12,5 -> 12500."""
    return f"{float(number_value(raw)) * 1000:.0f}"


def number_value(raw: str) -> str:
    """A number as written in any convention, in one form: 1,250.00, 1.250,00 and 1250 are
    1250; 16,5 is 16.5; times (16:00), versions (3.11.9) and dates (15.04) stay as they are."""
    number = raw.rstrip(".,:")
    if ":" in number or (number.count(".") > 1 and "," not in number):
        return number
    # Thousands separators: a separator followed by exactly three digits, then the end or
    # another separator.
    number = re.sub(r"(?<=\d)[,.](?=\d{3}(?:[,.]|$))", "", number)
    number = re.sub(r",(?=\d{1,2}$)", ".", number)  # a decimal comma
    number = re.sub(r"\.0+$", "", number)
    return number


@_cached
def names(text: str) -> frozenset[str]:
    """Capitalised words that do not start a sentence (and are not "I"): names and places;
    and, whatever their case, a word after a title (Mrs, Dr), days and months (by their first
    three letters). Each as `stem` gives it, as `vocabulary` holds words."""
    found = {stem(name) for _, name in _TITLED_NAME.findall(text)}
    found |= {stem(match) for match in _GIVEN_NAME.findall(text)}
    found |= {match.lower()[:3] for match in _CALENDAR_WORD.findall(text)}
    nouns_capitalised = _capitalises_nouns(text)
    for sentence in sentences(text):
        matches = list(WORD.finditer(sentence))
        for previous, match in itertools.pairwise(matches):
            before, word = previous.group(), match.group()
            if not word[0].isupper() or word.lower() in _NOT_NAMES or word in ("I", "I'm"):
                continue
            if _QUOTE_OPENS.search(sentence, previous.end(), match.start()) and (
                language.CHANGE.fullmatch(word)
                or language.CONFIRMATION.fullmatch(word)
                or stem(word) in TIME_WORDS
                or word.lower() in _FUNCTION_WORDS_ANYWHERE
            ):
                continue  # a quoted sentence's first word: '"Ahora', '"Bei', '"Noté'
            if nouns_capitalised and not _looks_like_a_name_among_nouns(before, word):
                continue
            if _abbreviates_words(sentence, match):
                continue
            found.add(stem(word))
    return frozenset(found)


def _capitalises_nouns(text: str) -> bool:
    """The text is in a language that capitalises every noun (German): it holds two of its
    function words. There a capital letter does not mark a name."""
    every_word = {word.lower() for word in WORD.findall(text)}
    return len(every_word & language.NOUN_CAPITALISING) >= 2


def _abbreviates_words(sentence: str, match: re.Match[str]) -> bool:
    """The word is an abbreviation the sentence spells out, no name: capitals that spell
    out, in brackets, the words just before or after them ("ligamento cruzado anterior
    (LCA)", "SLA (service level agreement)"); in any language."""
    word = match.group()
    if not (2 <= len(word) <= 6 and word.isupper() and word.isalpha()):
        return False
    initials = word.lower()
    if sentence[: match.start()].rstrip().endswith("("):
        before = WORD.findall(sentence[: match.start()])
        return _initials_of(before[-len(word) :]) == initials or _initials_of(
            [w for w in before if w.lower() not in STOPWORDS][-len(word) :]
        ) == initials
    after = sentence[match.end() :].lstrip()
    if after.startswith("("):
        inside = WORD.findall(after[1 : after.find(")") if ")" in after else None])
        return initials in (
            _initials_of(inside),
            _initials_of([w for w in inside if w.lower() not in STOPWORDS]),
        )
    return False


def _initials_of(words: Sequence[str]) -> str:
    return "".join(word[0].lower() for word in words)


# A quotation that starts after a colon starts a sentence: 'The user said: "Desde hoy ...'.
_QUOTE_OPENS = re.compile(r":\s*[\"“«„]")
# Function words of any covered language, those that are content words in another ("die",
# "bei") too: at the start of a quoted sentence they are capitalised as its first word.
_FUNCTION_WORDS_ANYWHERE = language.words_of("stopwords")


_DETERMINERS = language.DETERMINERS
_PREPOSITIONS = language.PREPOSITIONS


def _looks_like_a_name_among_nouns(before: str, word: str) -> bool:
    """In a language that capitalises every noun (German), a capitalised word is taken for a
    name when it is an acronym or has a capital inside (DHL, PostgreSQL), or when no article,
    adjective or number comes before it ("mit Hermes", "in Leipzig"; not "das Lager")."""
    if _INNER_CAPITAL.match(word):
        return True
    lowered = before.lower()
    if lowered in _DETERMINERS or before[0].isdigit():
        return False
    if lowered in _PREPOSITIONS:
        return True
    return not (before[0].islower() and lowered.endswith(("e", "en", "er", "es", "em")))


@_cached
def content_words(text: str) -> frozenset[str]:
    text = normalise_text(text)
    return frozenset(
        stem(word)
        for word in WORD.findall(text)
        if not word[0].isdigit()
        and word.lower() not in STOPWORDS
        and len(word) > 2
        and not _IDEOGRAPHIC.search(word)
    ) | ideographic_pairs(text)


# Chinese characters and Japanese katakana: the words of the scripts written without spaces
# that carry meaning (hiragana mostly spells grammar).
_IDEOGRAPHIC = re.compile(r"[\p{Han}\p{Katakana}ー]")
_IDEOGRAPHIC_RUN = re.compile(r"[\p{Han}\p{Katakana}ー]{2,}")


def ideographic_pairs(text: str) -> frozenset[str]:
    """Every two characters side by side in a run of Chinese characters or katakana ("食費",
    "費は" is not one): the words of a text without spaces, as two texts are compared (a
    word of two characters or more shares a pair with itself in any other text)."""
    return frozenset(
        run[i : i + 2]
        for run in _IDEOGRAPHIC_RUN.findall(text)
        for i in range(len(run) - 1)
    )


@_cached
def vocabulary(text: str) -> frozenset[str]:
    """Every stemmed word and number of a text: what a grounded sentence may use."""
    text = normalise_text(text)
    # Days and months as `names` gives them (their first three letters), so that a sentence
    # naming "Friday" is grounded in a source that names it.
    calendar = {match.lower()[:3] for match in _CALENDAR_WORD.findall(text)}
    found = frozenset(stem(word) for word in WORD.findall(text))
    return (
        found
        | numbers(text)
        | amounts_in_thousands(text)
        | calendar
        | references(text)
        | ideographic_pairs(text)
    )


TIME_UNITS = language.TIME_UNITS


# Marks a slot known only by its period ("$200 a day"): weaker than one named by a noun.
PERIOD_SLOT = "per "


@_cached
def number_slots(text: str) -> Mapping[str, frozenset[str]]:
    """Each number with the nouns it belongs to: the word before it ("plot 14" -> plot), and
    the first word after it that is neither common nor a unit of the clock ("25% of every
    invoice" -> invoice); a word of time only when nothing else follows ("$200 a day" ->
    day)."""
    words = WORD.findall(normalise_text(text))
    # A code of four digits or more counts no name: "69003 Lyon" is a postcode and its city.
    found_names = names(text)
    slots: dict[str, set[str]] = {}
    for index, word in enumerate(words):
        if word.lower() in COUNT_WORDS:
            number = COUNT_WORDS[word.lower()]
        elif word[0].isdigit() and not word[-1].isalpha():  # "15th" is a date, not a count
            number = re.sub(r"[,.:](?=\d{3}\b)", "", word)
        else:
            continue
        before = words[index - 1].lower() if index else ""
        if before and before not in STOPWORDS and not before[0].isdigit() and len(before) > 2:
            if before not in TIME_UNITS and not is_calendar_word(before) and before != "may" \
                    and not before.endswith(("ing", "ed")):
                slots.setdefault(stem(before), set()).add(number)  # "plot 14", "rent 1650"
        period = None
        for following in words[index + 1 : index + 4]:
            lowered = following.lower()
            if following[0].isdigit() or lowered in TIME_UNITS or is_calendar_word(lowered):
                break
            if stem(lowered) in TIME_WORDS:
                period = period or stem(lowered)
                continue
            if lowered in STOPWORDS or lowered in FREQUENCY:
                continue
            if lowered.endswith(("ing", "ed")) or len(lowered) < 3:
                continue  # a verb or an ordinal's ending, not what the number counts
            if not (number.isdigit() and len(number) >= 4) or stem(following) not in found_names:
                slots.setdefault(stem(lowered), set()).add(number)
            break
        else:
            # "$200 a day": an amount of money per period; "7 years old" is no such slot.
            if period and re.search(r"[$€£]\s?" + re.escape(word) + r"\b", text):
                slots.setdefault(PERIOD_SLOT + period, set()).add(number)
    return MappingProxyType({slot: frozenset(found) for slot, found in slots.items()})


def values(text: str) -> frozenset[str]:
    """The specific values a text gives: its numbers, names and references."""
    return numbers(text) | names(text) | references(text)
