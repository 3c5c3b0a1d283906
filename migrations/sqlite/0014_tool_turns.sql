-- Tools pass through a dialect client's conversation to the model (loop/central.py).
-- On an assistant reply, `tool_calls`: the calls of the client's tools the model made, as JSON
-- [{"id", "name", "arguments"}]. On a `tool` message, `tool_call_id` and `tool_name`: the call
-- whose result it is.
ALTER TABLE messages ADD COLUMN tool_calls TEXT;
ALTER TABLE messages ADD COLUMN tool_call_id TEXT;
ALTER TABLE messages ADD COLUMN tool_name TEXT;
-- `tools`: the tools the client offers the model and its tool_choice, as JSON
-- {"tools": [{"name", "description", "parameters"}], "choice": "auto"}; NULL: none.
ALTER TABLE conversations ADD COLUMN tools TEXT;
