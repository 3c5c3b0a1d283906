-- The whole first schema: apps, conversations and their messages, the seed's app_memories,
-- durable memory jobs and the persistent energy budget.

CREATE TABLE apps (
  app_id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  installed INTEGER NOT NULL DEFAULT 1,
  installed_at TEXT NOT NULL,
  uninstalled_at TEXT,
  api_key_hash TEXT
);

CREATE TABLE conversations (
  conversation_id TEXT PRIMARY KEY,
  app_id TEXT NOT NULL REFERENCES apps(app_id) ON DELETE CASCADE,
  status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'ended')),
  end_reason TEXT,
  created_at TEXT NOT NULL,
  ended_at TEXT,
  last_activity_at TEXT NOT NULL
);
CREATE INDEX idx_conversations_app_id ON conversations(app_id);
CREATE INDEX idx_conversations_open_activity ON conversations(status, last_activity_at);

CREATE TABLE messages (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id TEXT NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
  content TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX idx_messages_conversation_id ON messages(conversation_id, id);

-- The seed's table, column for column.
CREATE TABLE app_memories (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  app_id TEXT NOT NULL,
  content TEXT NOT NULL,
  created_at DATETIME DEFAULT CURRENT_TIMESTAMP,
  updated_at DATETIME DEFAULT CURRENT_TIMESTAMP,
  source_conversation_id TEXT,
  metadata TEXT, -- JSON: { importance: number, tags: string[], ... }

  FOREIGN KEY (app_id) REFERENCES apps(app_id) ON DELETE CASCADE
);
CREATE INDEX idx_app_memories_app_id ON app_memories(app_id);
CREATE INDEX idx_app_memories_created_at ON app_memories(created_at);
CREATE INDEX idx_app_memories_updated_at ON app_memories(updated_at);
-- Serves "newest memories of one app" straight from the index.
CREATE INDEX idx_app_memories_app_created ON app_memories(app_id, created_at, id);

CREATE TABLE memory_jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  app_id TEXT NOT NULL REFERENCES apps(app_id) ON DELETE CASCADE,
  conversation_id TEXT NOT NULL UNIQUE REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  status TEXT NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'running', 'deferred', 'done', 'skipped', 'failed')),
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  not_before TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX idx_memory_jobs_status ON memory_jobs(status, id);
CREATE INDEX idx_memory_jobs_app_id ON memory_jobs(app_id, id);

-- One row: the level as of updated_at, and the running totals per kind of spending.
CREATE TABLE energy_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  level REAL NOT NULL,
  updated_at TEXT NOT NULL,
  memory_spent INTEGER NOT NULL DEFAULT 0,
  conversation_spent INTEGER NOT NULL DEFAULT 0
);
