-- What the loop is doing with a conversation's answer: nothing (NULL), answering, or failed
-- (with the error and how many tries it took), so an app can see it and retry.
ALTER TABLE conversations ADD COLUMN answer_state TEXT
  CHECK (answer_state IS NULL OR answer_state IN ('answering', 'failed'));
ALTER TABLE conversations ADD COLUMN answer_error TEXT;
ALTER TABLE conversations ADD COLUMN answer_attempts INTEGER NOT NULL DEFAULT 0;
