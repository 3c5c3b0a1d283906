"""The extractive writer's words: one file a language (`languages/<code>.toml`), read by
`language.py`, and the readings of a text that rest on them."""
