-- Which user messages an answer answered. A message posted while the answer to an earlier
-- one is being written is newer than what that answer saw: it still waits for its own, and
-- the stored answer is not taken for its reply.
-- `answered_up_to`: the newest message the last stored answer saw (0: none yet).
-- `in_reply_to`: on an assistant message, the newest message its answer saw.
ALTER TABLE conversations ADD COLUMN answered_up_to BIGINT NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN in_reply_to BIGINT;
UPDATE messages SET in_reply_to = (
  SELECT MAX(u.id) FROM messages u
  WHERE u.conversation_id = messages.conversation_id AND u.id < messages.id
) WHERE role = 'assistant';
UPDATE conversations SET answered_up_to = COALESCE((
  SELECT MAX(m.id) FROM messages m
  WHERE m.conversation_id = conversations.conversation_id AND m.role = 'assistant'
), 0);
