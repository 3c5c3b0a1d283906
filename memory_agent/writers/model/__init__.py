"""The model writer: the configured model writes each memory in its own words, every sentence
grounded by a quote of the conversation, and makes the DELETE/EDIT."""
