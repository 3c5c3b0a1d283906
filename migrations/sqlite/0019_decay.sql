-- A memory's decay within a conversation (memory_agent/recall/decay.py): the injections that
-- count are those since `counted_from` (a relevance tag starts the count again), and `stale`
-- says it came to the conversation unseen for a week (its count then weighs double).
ALTER TABLE memory_injections ADD COLUMN counted_from INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memory_injections ADD COLUMN stale INTEGER NOT NULL DEFAULT 0;
