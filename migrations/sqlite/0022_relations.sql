-- Links between memories of one space: written when a memory is created, merged or
-- consolidated, to the memories it shares most with (strength: that share, 0-1). One edge a
-- pair (from the lower id to the higher), gone with either memory (and so with a purge or a
-- person's erasure).
CREATE TABLE relations (
  from_id INTEGER NOT NULL REFERENCES app_memories(id) ON DELETE CASCADE,
  to_id INTEGER NOT NULL REFERENCES app_memories(id) ON DELETE CASCADE,
  type TEXT NOT NULL,
  strength REAL NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (from_id, to_id, type),
  CHECK (from_id < to_id)
);
CREATE INDEX relations_to ON relations (to_id);
