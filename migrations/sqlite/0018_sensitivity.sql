-- A memory's sensitivity, the seed's levels: public (injected and given to models), private
-- (never injected; listed and exported), secret (the same, and never shown to a model: no
-- prompt, no MCP tool), unknown (never returned by any read: fail-closed). `private` stays the
-- flag every injection reads; it is set for every level but public.
ALTER TABLE app_memories ADD COLUMN sensitivity TEXT NOT NULL DEFAULT 'public'
  CHECK (sensitivity IN ('public', 'private', 'secret', 'unknown'));
UPDATE app_memories SET sensitivity = 'private' WHERE private = 1;
