-- A client thread (an app's key with no user or conversation named, say) may hold several open
-- conversations at once: many people behind one key, a client's batch of unrelated prompts
-- (loop/client_threads.py). The index that kept one open conversation per thread goes; an
-- index for finding a thread's open conversations takes its place.
DROP INDEX conversations_open_client_thread;
CREATE INDEX conversations_client_thread ON conversations (app_id, client_thread)
  WHERE status = 'open' AND client_thread IS NOT NULL;
-- `answer_schema`: the JSON schema a dialect client asked its answers to follow (OpenAI's
-- `response_format`, Ollama's `format`), as JSON text; NULL: answers are text.
ALTER TABLE conversations ADD COLUMN answer_schema TEXT;
