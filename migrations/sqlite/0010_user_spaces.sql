-- Memory spaces per user of an app. `user_id` '' is the app's shared space, where every
-- memory written before spaces stays; conversations, their memory jobs, memories and history
-- events carry the space they belong to.
-- `apps.users_write_shared`: a user's conversation writes its memory to the shared space too.
ALTER TABLE conversations ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE memory_jobs ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE app_memories ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE memory_events ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE apps ADD COLUMN users_write_shared INTEGER NOT NULL DEFAULT 0;
-- A space's newest memories straight from the index (replaces the app-wide one).
DROP INDEX idx_app_memories_app_created;
CREATE INDEX idx_app_memories_space ON app_memories (app_id, user_id, created_at, id);
-- Erasing a person across apps.
CREATE INDEX idx_app_memories_user ON app_memories (user_id) WHERE user_id <> '';
CREATE INDEX idx_conversations_user ON conversations (user_id) WHERE user_id <> '';
CREATE INDEX idx_memory_events_user ON memory_events (user_id) WHERE user_id <> '';
