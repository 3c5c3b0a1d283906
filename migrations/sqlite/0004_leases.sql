-- Several instances on one database: a claim on a memory job or on an answer names its owner
-- and holds until `..._until` unless renewed, so another instance takes over the work of one
-- that died. The energy level's time is also kept as seconds since 1970, so that a charge
-- can refill and spend in one statement.
ALTER TABLE memory_jobs ADD COLUMN lease_owner TEXT;
ALTER TABLE memory_jobs ADD COLUMN lease_until TEXT;
ALTER TABLE conversations ADD COLUMN answer_owner TEXT;
ALTER TABLE conversations ADD COLUMN answer_lease_until TEXT;
ALTER TABLE energy_state ADD COLUMN as_of_s REAL NOT NULL DEFAULT 0;
UPDATE energy_state SET as_of_s = (julianday(updated_at) - 2440587.5) * 86400.0;
