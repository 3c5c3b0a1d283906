"""The extractive writer: a memory of the conversation's key statements in the speakers' own
words, kept current by the retention policy's rules; its words are in `words/`."""
