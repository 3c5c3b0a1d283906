-- Which model wrote an assistant reply (its name, `local:SmolLM2-135M-Instruct.Q4_1` for the
-- bundled one); NULL for a message an app or a client wrote. The memory job never keeps what
-- the bundled 135M model said as a confirmation of something done: it is often made up.
ALTER TABLE messages ADD COLUMN written_by TEXT;
