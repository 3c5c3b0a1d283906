-- Memory history (one append-only event per change to a memory), the job statuses and
-- outcomes that memory work reports, and `cancelled` for jobs a purge stopped.

CREATE TABLE memory_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  app_id TEXT NOT NULL,
  memory_id INTEGER NOT NULL,
  event TEXT NOT NULL CHECK (event IN ('created', 'edited', 'deleted')),
  actor TEXT NOT NULL CHECK (actor IN ('job', 'model', 'policy', 'admin', 'purge', 'import')),
  reason TEXT,
  content_before TEXT,
  content_after TEXT,
  conversation_id TEXT,
  job_id INTEGER,
  model TEXT,
  erased INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL
);
CREATE INDEX idx_memory_events_app ON memory_events(app_id, id);
CREATE INDEX idx_memory_events_memory ON memory_events(app_id, memory_id, id);

-- SQLite cannot widen a CHECK constraint in place: the jobs table is rebuilt.
CREATE TABLE memory_jobs_new (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  app_id TEXT NOT NULL REFERENCES apps(app_id) ON DELETE CASCADE,
  conversation_id TEXT NOT NULL UNIQUE REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  status TEXT NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'running', 'deferred', 'done', 'skipped', 'failed', 'cancelled')),
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  not_before TEXT,
  -- What the job did: the memory it wrote (if it still stands as its own), a note, and its
  -- compaction steps as JSON.
  memory_id INTEGER,
  note TEXT,
  steps TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
INSERT INTO memory_jobs_new (id, app_id, conversation_id, status, attempts, last_error,
  not_before, created_at, updated_at)
  SELECT id, app_id, conversation_id, status, attempts, last_error, not_before, created_at,
    updated_at FROM memory_jobs;
DROP TABLE memory_jobs;
ALTER TABLE memory_jobs_new RENAME TO memory_jobs;
CREATE INDEX idx_memory_jobs_status ON memory_jobs(status, id);
CREATE INDEX idx_memory_jobs_app_id ON memory_jobs(app_id, id);
