-- A memory's kind (memory_agent/core/kinds.toml: the seed's categories), which every memory
-- kept before is of 'fact'; and the kinds an app's key may read (a JSON list; NULL: every kind).
ALTER TABLE app_memories ADD COLUMN kind TEXT NOT NULL DEFAULT 'fact';
ALTER TABLE apps ADD COLUMN allowed_kinds TEXT;
