-- How memories are used. Each time a turn of a stored conversation is given a memory in its
-- memory block (an injection), and each time the reply uses the memory's values (a
-- citation): per conversation here, and in all on the memory. The rows name no text; they go
-- with the memory or the conversation they belong to.
ALTER TABLE app_memories ADD COLUMN access_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE app_memories ADD COLUMN citation_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE app_memories ADD COLUMN last_accessed TEXT;

CREATE TABLE memory_injections (
  conversation_id TEXT NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  memory_id BIGINT NOT NULL REFERENCES app_memories(id) ON DELETE CASCADE,
  shown INTEGER NOT NULL,
  cited INTEGER NOT NULL DEFAULT 0,
  first_at TEXT NOT NULL,
  last_at TEXT NOT NULL,
  PRIMARY KEY (conversation_id, memory_id)
);
CREATE INDEX idx_memory_injections_memory ON memory_injections(memory_id);
