-- Full-text search over memories: each memory's terms, kept by PostgreSQL itself in the row
-- (so in the transaction that writes the memory), with a GIN index.

ALTER TABLE app_memories
  ADD COLUMN search tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED;
CREATE INDEX idx_app_memories_search ON app_memories USING GIN (search);
