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
-- them (an app with its own key, the worker).
ALTER TABLE memory_events DROP CONSTRAINT memory_events_event_check;
ALTER TABLE memory_events ADD CONSTRAINT memory_events_event_check
  CHECK (event IN ('created', 'edited', 'deleted', 'restored', 'erased',
    'pinned', 'unpinned', 'importance', 'private', 'public', 'expiry'));
ALTER TABLE memory_events DROP CONSTRAINT memory_events_actor_check;
ALTER TABLE memory_events ADD CONSTRAINT memory_events_actor_check
  CHECK (actor IN ('job', 'model', 'policy', 'admin', 'purge', 'import', 'app', 'worker'));
