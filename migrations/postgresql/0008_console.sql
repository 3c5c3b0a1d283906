-- The web console: signed-in sessions, and energy spending by the minute for its chart.
-- A session is found by the SHA-256 hash of its cookie (the cookie itself is not stored); it
-- names the admin token it was opened with, so that a rotated token ends it; `csrf` is the
-- token its forms carry.
CREATE TABLE console_sessions (
  session_hash TEXT PRIMARY KEY,
  token_hash TEXT NOT NULL,
  csrf TEXT NOT NULL,
  created_at TEXT NOT NULL,
  expires_s DOUBLE PRECISION NOT NULL
);
-- Units spent per minute (seconds since 1970, divisible by 60) and kind. Every instance adds
-- its own spending to the same rows.
CREATE TABLE energy_spending (
  minute_s BIGINT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('memory', 'conversation')),
  units BIGINT NOT NULL,
  PRIMARY KEY (minute_s, kind)
);
