-- Consolidation passes (memory_agent/consolidation): requested through the API or by the
-- schedule, run by a memory worker under a lease, with what each did. A NULL app or user is
-- every app or every person.
CREATE TABLE consolidations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  app_id TEXT,
  user_id TEXT,
  origin TEXT NOT NULL CHECK (origin IN ('request', 'schedule')),
  status TEXT NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled')),
  requested_at TEXT NOT NULL,
  started_at TEXT,
  finished_at TEXT,
  lease_owner TEXT,
  lease_until TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  spaces INTEGER NOT NULL DEFAULT 0,
  pairs_asked INTEGER NOT NULL DEFAULT 0,
  pairs_unjudged INTEGER NOT NULL DEFAULT 0,
  changes INTEGER NOT NULL DEFAULT 0,
  model_calls INTEGER NOT NULL DEFAULT 0,
  error TEXT
);
CREATE INDEX consolidations_status ON consolidations (status, id);
-- Pairs of memories a pass has asked about, by a fingerprint of their two texts: not asked
-- again until the recheck period is over (or either text changes). Kept with the space of the
-- older memory, so that a purge or a person's erasure takes them too.
CREATE TABLE consolidation_checks (
  fingerprint TEXT PRIMARY KEY,
  app_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  checked_at TEXT NOT NULL
);
CREATE INDEX consolidation_checks_age ON consolidation_checks (checked_at);
CREATE INDEX consolidation_checks_space ON consolidation_checks (user_id, app_id);
