-- A person's profile: facts about them that hold whatever the app (name, timezone, diet,
-- household, …), shared by the apps whose installation allows it (`apps.shares_profile`).
-- Its memories are app_memories (and their history memory_events) of the profile space:
-- app_id '' (no app can have that id) and the person's user_id. `profiles` has a row per
-- person with a profile, which every profile write locks, so the profile's cap holds across
-- instances. The profile space's memories point at an apps row of their own ('' is no app's
-- id: no route can name it, and listings leave it out).
ALTER TABLE apps ADD COLUMN shares_profile INTEGER NOT NULL DEFAULT 0;
INSERT INTO apps (app_id, name, installed, installed_at)
  VALUES ('', 'profiles', 0, '1970-01-01T00:00:00Z');
CREATE TABLE profiles (
  user_id TEXT PRIMARY KEY,
  created_at TEXT NOT NULL
);
-- The memory delta header: the newest memory event of its spaces a conversation's memory
-- block was built with (its revision); the next conversation of the same user in the app
-- names what changed after it.
ALTER TABLE conversations ADD COLUMN memory_revision INTEGER;
CREATE INDEX idx_conversations_app_user ON conversations (app_id, user_id, created_at);
CREATE INDEX idx_memory_events_space ON memory_events (app_id, user_id, id);
