-- Changes the writers propose to a sensitive fact of a person's profile (their name, city,
-- health...: memory_agent/consent), waiting for the person's answer. Nothing proposed is
-- injected; an accepted proposal is written into the profile then. The row stays as the
-- proposal's record (who proposed what, and what the person decided) until the person is
-- erased or the app it came from is purged.
CREATE TABLE profile_proposals (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id TEXT NOT NULL,
  app_id TEXT NOT NULL,
  origin TEXT NOT NULL CHECK (origin IN ('memory', 'consolidation')),
  fields TEXT NOT NULL,
  content TEXT,
  before TEXT,
  change TEXT NOT NULL,
  conversation_id TEXT,
  job_id INTEGER,
  status TEXT NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'accepted', 'declined', 'lapsed', 'superseded')),
  proposed_at TEXT NOT NULL,
  lapses_at TEXT NOT NULL,
  decided_at TEXT,
  decided_through TEXT,
  memory_id INTEGER
);
CREATE INDEX profile_proposals_user ON profile_proposals (user_id, status, id);
CREATE INDEX profile_proposals_pending ON profile_proposals (lapses_at) WHERE status = 'pending';
