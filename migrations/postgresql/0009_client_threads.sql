-- Conversations held for clients of the OpenAI and Ollama dialects, which resend the whole
-- history with each request (admin_api/dialects, loop/client_threads.py).
-- `client_thread`: the caller's thread ("<user>/<conversation>", both possibly empty); at most
--   one open conversation per app and thread. NULL on conversations of the native routes.
-- `system_prompt`: the client's own system prompt, used in place of the service's.
-- `model`: the model the client named, when the backend has it (NULL: the configured one).
-- `prompt_tokens`/`completion_tokens`: on an assistant message, what its answer used.
-- `carried`: a turn stored from a client's history, which the memory job leaves out.
ALTER TABLE conversations ADD COLUMN client_thread TEXT;
ALTER TABLE conversations ADD COLUMN system_prompt TEXT;
ALTER TABLE conversations ADD COLUMN model TEXT;
ALTER TABLE messages ADD COLUMN prompt_tokens INTEGER;
ALTER TABLE messages ADD COLUMN completion_tokens INTEGER;
ALTER TABLE messages ADD COLUMN carried INTEGER NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX conversations_open_client_thread ON conversations (app_id, client_thread)
  WHERE status = 'open' AND client_thread IS NOT NULL;
