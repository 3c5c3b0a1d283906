"""The embedded backend's streamed text leaves out its `CALL <tool>` lines (the tool calls
are read from the whole answer), without holding back ordinary text."""

from __future__ import annotations

from loop.llm.local import _WithoutToolCalls


def streamed(*pieces: str) -> tuple[list[str], str]:
    handed: list[str] = []
    visible = _WithoutToolCalls(handed.append)
    for piece in pieces:
        visible(piece)
    visible.finish()
    return handed, "".join(handed)


def test_ordinary_text_passes_at_once_piece_by_piece() -> None:
    handed, text = streamed("Hello", " there,", " friend.")
    assert handed == ["Hello", " there,", " friend."]
    assert text == "Hello there, friend."


def test_a_tool_call_line_is_left_out_wherever_it_is_split() -> None:
    for pieces in (
        ("Goodbye!\n", "CALL end_conversation"),
        ("Goodbye!\nCA", "LL end_", "conversation\n"),
        ("CALL end_conversation\n", "Bye."),
    ):
        _, text = streamed(*pieces)
        assert "CALL" not in text, pieces
        assert text.strip() in ("Goodbye!", "Bye.")


def test_text_that_only_starts_like_a_call_is_handed_on() -> None:
    _, text = streamed("CAL", "ENDAR is full.\n", "CALLED you twice.")
    assert text == "CALENDAR is full.\nCALLED you twice."
    _, text = streamed("CALL me tomorrow, please")
    assert text == "CALL me tomorrow, please"
