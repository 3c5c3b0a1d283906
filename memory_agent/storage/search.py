"""Search queries as people type them, made safe for either engine's full-text search.

A query is read as words: whatever else it holds (quotes, `*`, `NEAR`, `-`, brackets) is
punctuation, never syntax, so no query can fail inside the engine. The engines rank memories
holding more of the words, and rarer ones, first (SQLite's bm25, PostgreSQL's ts_rank).
"""

from __future__ import annotations

from memory_agent.core import patterns as re
from memory_agent.core.errors import InvalidSearchQuery
from memory_agent.core.unicode_forms import normalise_text

MAX_QUERY_CHARS = 500
MAX_TERMS = 32
_WORD = re.compile(r"[^\W_]+")


def search_terms(query: str) -> list[str]:
    """The query's distinct words, lowercased, in order (at most MAX_TERMS)."""
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidSearchQuery(
            f"the query is {len(query)} characters long; at most {MAX_QUERY_CHARS} are searched"
        )
    words = _WORD.findall(normalise_text(query).lower())
    if not words:
        raise InvalidSearchQuery(
            "the query is empty" if not query.strip() else "the query holds no words to search for"
        )
    return list(dict.fromkeys(words))[:MAX_TERMS]


def sqlite_match(terms: list[str]) -> str:
    """An FTS5 MATCH expression: any of the words, each quoted as a string."""
    return " OR ".join(f'"{term}"' for term in terms)


def postgres_websearch(terms: list[str]) -> str:
    """A `websearch_to_tsquery` text: any of the words (that function never raises)."""
    return " or ".join(terms)
