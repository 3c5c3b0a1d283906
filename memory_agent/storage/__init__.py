"""Memories, their history and their search index, in the SQL both engines run."""
