-- The generated admin token, kept across restarts and shared by every instance: only its
-- SHA-256 hash is stored (the token is printed once). One row at most.
CREATE TABLE admin_token (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  token_hash TEXT NOT NULL,
  created_at TEXT NOT NULL
);
