-- Steering memories: pinned (compaction never removes it), private (listed and exported,
-- never injected), an expiry time, and soft deletion (`deleted_at`): an expired or deleted
-- memory is kept, out of sight, for a grace period in which it can be restored, then the
-- worker erases it. The importance (0-10) lives in `metadata`, as the seed has it.
-- `apps.memory_ttl_seconds`: the expiry a new memory of the app gets by default.
ALTER TABLE app_memories ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE app_memories ADD COLUMN private INTEGER NOT NULL DEFAULT 0;
ALTER TABLE app_memories ADD COLUMN expires_at TEXT;
ALTER TABLE app_memories ADD COLUMN deleted_at TEXT;
ALTER TABLE apps ADD COLUMN memory_ttl_seconds INTEGER;
-- The worker's sweep for memories whose grace period is over.
CREATE INDEX idx_app_memories_expires ON app_memories (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX idx_app_memories_deleted ON app_memories (deleted_at) WHERE deleted_at IS NOT NULL;

-- History: the new steps (restored, erased, pin, importance, privacy, expiry) and who took
-- them (an app with its own key, the worker). SQLite cannot widen a CHECK constraint in
-- place: the table is rebuilt, ids kept.
CREATE TABLE memory_events_new (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  app_id TEXT NOT NULL,
  memory_id INTEGER NOT NULL,
  event TEXT NOT NULL CHECK (event IN ('created', 'edited', 'deleted', 'restored', 'erased',
    'pinned', 'unpinned', 'importance', 'private', 'public', 'expiry')),
  actor TEXT NOT NULL CHECK (actor IN ('job', 'model', 'policy', 'admin', 'purge', 'import',
    'app', 'worker')),
  reason TEXT,
  content_before TEXT,
  content_after TEXT,
  conversation_id TEXT,
  job_id INTEGER,
  model TEXT,
  erased INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  user_id TEXT NOT NULL DEFAULT ''
);
INSERT INTO memory_events_new (id, app_id, memory_id, event, actor, reason, content_before,
  content_after, conversation_id, job_id, model, erased, created_at, user_id)
  SELECT id, app_id, memory_id, event, actor, reason, content_before, content_after,
    conversation_id, job_id, model, erased, created_at, user_id FROM memory_events;
-- Ids go on from where they were, even past events since erased: a history cursor (`since`)
-- never sees an id twice.
INSERT INTO sqlite_sequence (name, seq)
  SELECT 'memory_events_new', 0
  WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'memory_events_new');
UPDATE sqlite_sequence SET seq = (
    SELECT MAX(seq) FROM sqlite_sequence WHERE name IN ('memory_events', 'memory_events_new'))
  WHERE name = 'memory_events_new';
DROP TABLE memory_events;
ALTER TABLE memory_events_new RENAME TO memory_events;
CREATE INDEX idx_memory_events_app ON memory_events(app_id, id);
CREATE INDEX idx_memory_events_memory ON memory_events(app_id, memory_id, id);
CREATE INDEX idx_memory_events_user ON memory_events (user_id) WHERE user_id <> '';
