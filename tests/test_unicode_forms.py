"""The one form every check compares texts in (`core.unicode_forms.folded`): the same for a
text however it is written, in any script, short or long."""

from __future__ import annotations

from memory_agent.core.unicode_forms import folded, words


def test_ascii_keeps_only_lowered_letters_and_digits():
    assert folded("Room 4B, Floor 12 -- ask for *Ana*!") == "room4bfloor12askforana"


def test_every_ascii_character_folds_to_itself_lowered_or_to_nothing():
    every = "".join(map(chr, range(128)))
    for char in every:
        assert folded(char) == (char.lower() if char.isalnum() else "")
    assert folded(every) == "0123456789" + "abcdefghijklmnopqrstuvwxyz" * 2


def test_compatibility_forms_case_and_every_scripts_digits_fold_alike():
    assert folded("ＲＯＯＭ　４Ｂ") == folded("room 4b") == "room4b"
    assert folded("İstanbul") == folded("ISTANBUL") == "istanbul"
    assert folded("الغرفة ٤٢") == "الغرفة42"
    assert folded("कमरा ४२") == folded("कमरा 42")
    assert folded("Straße") == "strasse"


def test_a_long_text_folds_as_its_parts_do():
    part = "Die Straße Nr. ٤٢ liegt in İzmir. "
    assert folded(part * 200) == folded(part) * 200


def test_words_are_folded_words_in_any_script():
    assert words("Ana's CAFÉ, ４２ 東京") == ["ana", "s", "café", "42", "東", "京"]
