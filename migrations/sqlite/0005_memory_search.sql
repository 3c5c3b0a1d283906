-- Full-text search over memories: an FTS5 index of app_memories.content, ranked with bm25.
-- The index holds terms only (the text stays in app_memories, `content=`), and triggers keep
-- it in the very transaction that writes the memory.

CREATE VIRTUAL TABLE memory_search USING fts5(
  content,
  content = 'app_memories',
  content_rowid = 'id',
  tokenize = 'porter unicode61 remove_diacritics 2'
);

INSERT INTO memory_search (rowid, content) SELECT id, content FROM app_memories;

CREATE TRIGGER memory_search_insert AFTER INSERT ON app_memories BEGIN
  INSERT INTO memory_search (rowid, content) VALUES (new.id, new.content);
END;

CREATE TRIGGER memory_search_delete AFTER DELETE ON app_memories BEGIN
  INSERT INTO memory_search (memory_search, rowid, content) VALUES ('delete', old.id, old.content);
END;

CREATE TRIGGER memory_search_update AFTER UPDATE OF content ON app_memories BEGIN
  INSERT INTO memory_search (memory_search, rowid, content) VALUES ('delete', old.id, old.content);
  INSERT INTO memory_search (rowid, content) VALUES (new.id, new.content);
END;
