-- Mnemo's whole current schema. bot.py applies it to a blank database and steps older ones
-- through the numbered migrations in bot.py (MIGRATIONS); the last line is the version.
-- The *_fts tables hold pre-tokenised text (CJK unigrams + bigrams, see text_tokens in bot.py):
-- FTS5's own tokenisers can't match two-character Chinese words. mnemo_tokens() is a SQL
-- function that bot.py registers on every connection, so edit these tables through bot.py.

-- One row per chat: a private chat ('p:<qq>') or a group ('g:<group>').
CREATE TABLE sessions (
    session TEXT PRIMARY KEY,
    character_id TEXT,                  -- chosen with 切换角色; NULL = default
    default_character TEXT,             -- a group's default, set by a superuser
    summarised_upto INTEGER NOT NULL DEFAULT 0,  -- messages.id of the last summarised turn
    paused INTEGER NOT NULL DEFAULT 0,  -- 1 = a superuser paused the bot in this group
    updated_at REAL NOT NULL,
    topic_from INTEGER NOT NULL DEFAULT 0  -- messages.id of the last 新话题: older raw turns stay out of prompts
);

-- Every message in and every reply out, stored before the next one of the session is handled.
-- 'ambient': a group message not addressed to the bot, kept (GROUP_CONTEXT_KEEP per group) only
-- as "what the group just said" for the next prompts; never indexed, summarised or remembered.
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    session TEXT NOT NULL,
    user_id TEXT NOT NULL,              -- QQ number of the speaker; for a reply, of the user it answers
    speaker TEXT NOT NULL,              -- display name
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    character_id TEXT NOT NULL,
    text TEXT NOT NULL,
    onebot_id TEXT,                     -- OneBot message_id, for quoting
    kind TEXT NOT NULL DEFAULT 'chat' CHECK (kind IN ('chat', 'command', 'ambient')),  -- commands stay out of recall
    created_at REAL NOT NULL
);
CREATE INDEX messages_session ON messages (session, id);
CREATE INDEX messages_ambient ON messages (session, id) WHERE kind = 'ambient';
CREATE INDEX messages_user ON messages (user_id, session);  -- one user's turns (忘记, 忘记关于我的一切), not the whole table

CREATE VIRTUAL TABLE messages_fts USING fts5(tokens, owner);
CREATE TRIGGER messages_ai AFTER INSERT ON messages WHEN new.kind = 'chat' BEGIN
    INSERT INTO messages_fts (rowid, tokens, owner) VALUES (new.id, mnemo_tokens(new.speaker || ' ' || new.text), mnemo_owner(new.session));
END;
CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;
CREATE TRIGGER messages_au AFTER UPDATE OF kind ON messages WHEN new.kind = 'command' BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;

-- Long-term memory: one fact about one subject, in the user's own words. type: user_fact (seen
-- by every character), experience (only by character_id) or group_fact (user_id is the group's
-- 'g:<group>': seen by everyone in that group only). scope: private, g:<group> or public.
CREATE TABLE memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: the history points at these ids
    user_id TEXT NOT NULL,              -- owner
    type TEXT NOT NULL CHECK (type IN ('user_fact', 'experience', 'group_fact')),
    character_id TEXT,                  -- NULL for user facts
    scope TEXT NOT NULL DEFAULT 'private',
    text TEXT NOT NULL,                 -- the user's words (one fact; a pronoun replaced by whom it means)
    subject TEXT NOT NULL DEFAULT '我',  -- 我 (the user), 妈妈, 女朋友, 猫 ..., 你 (the character)
    attribute TEXT,                     -- 现居地, 生日, 过敏, 最喜欢的动漫 ... when a rule recognised one
    value TEXT,                         -- 北京, 花生 ...: what an update of the same attribute replaces
    areas TEXT NOT NULL DEFAULT '',     -- life areas it touches as FTS tokens (zzhome zzdiet ...), see AREAS in bot.py
    importance INTEGER NOT NULL DEFAULT 1,   -- 2 = the user said it matters
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    last_used_at REAL,
    use_count INTEGER NOT NULL DEFAULT 0,
    source_message_id INTEGER,
    source_session TEXT,
    author_id TEXT,                     -- who said it (a group fact may be changed by its author)
    expansion TEXT                      -- words the LLM gave for it (memory_expansion_store); NULL = not asked yet
);
CREATE INDEX memories_user ON memories (user_id, type, id);
CREATE INDEX memories_key ON memories (user_id, subject, attribute);
CREATE INDEX memories_unexpanded ON memories (id) WHERE expansion IS NULL;  -- the expansions still to ask for

CREATE VIRTUAL TABLE memories_fts USING fts5(tokens, owner, extra);  -- extra: the expansion, weighted lower
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, tokens, owner, extra) VALUES (new.id, mnemo_tokens(new.text) || ' ' || new.areas, mnemo_owner(new.user_id), mnemo_tokens(new.expansion));
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    DELETE FROM memories_fts WHERE rowid = old.id;
END;
CREATE TRIGGER memories_au AFTER UPDATE OF text, areas, user_id, expansion ON memories BEGIN
    DELETE FROM memories_fts WHERE rowid = old.id;
    INSERT INTO memories_fts (rowid, tokens, owner, extra) VALUES (new.id, mnemo_tokens(new.text) || ' ' || new.areas, mnemo_owner(new.user_id),
        CASE WHEN new.text IS NOT old.text THEN '' ELSE mnemo_tokens(new.expansion) END);
END;
-- new words, new expansion: the old one is dropped and the LLM is asked again
CREATE TRIGGER memories_reexpand AFTER UPDATE OF text ON memories WHEN new.text IS NOT old.text BEGIN
    UPDATE memories SET expansion = NULL WHERE id = new.id;
END;

-- The user's profile as the LLM wrote it from their memories, per scope it is shown in ('p' = private chats,
-- 'g:<group>' = that group: only memories public there). digest: of the memories it was written from; when
-- they differ the rule-made profile (bot.py, memory_profile_rule) stands in until the LLM writes it again.
-- A memory changed or forgotten drops the user's profiles at once: its words never outlive it.
CREATE TABLE profiles (
    user_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    text TEXT NOT NULL,
    digest TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (user_id, scope)
);
CREATE TRIGGER memories_profile_ad AFTER DELETE ON memories BEGIN
    DELETE FROM profiles WHERE user_id = old.user_id;
END;
CREATE TRIGGER memories_profile_au AFTER UPDATE OF text, scope, user_id ON memories BEGIN
    DELETE FROM profiles WHERE user_id IN (old.user_id, new.user_id);
END;

-- What a memory was before each change, so 撤销 can bring it back. One command is one batch
-- (a message with three facts is undone as one); 'noop' records a command that changed nothing.
CREATE TABLE memory_history (
    id INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    memory_id INTEGER,
    action TEXT NOT NULL CHECK (action IN ('insert', 'update', 'delete', 'noop')),
    old_row TEXT,                       -- JSON of the row before the change
    batch INTEGER NOT NULL DEFAULT 0,   -- memory_history.id of the batch's first row
    scope TEXT,                         -- where the command was given (private, g:<group>)
    created_at REAL NOT NULL,
    undone INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX memory_history_user ON memory_history (user_id, id);

-- A character's lore (its card's character_book), kept in step with characters.json.
CREATE TABLE lore (
    id INTEGER PRIMARY KEY,
    character_id TEXT NOT NULL,
    keys TEXT NOT NULL,                 -- JSON list of words that bring the entry into a prompt
    content TEXT NOT NULL
);
CREATE INDEX lore_character ON lore (character_id, id);

-- Conversation summaries: a character's experience of one session. level 0 covers raw turns
-- first_msg..last_msg; level 1 rolls several level-0 ones up (they stay, with rolled_into set).
CREATE TABLE summaries (
    id INTEGER PRIMARY KEY,
    session TEXT NOT NULL,
    character_id TEXT NOT NULL,
    first_msg INTEGER NOT NULL,
    last_msg INTEGER NOT NULL,
    level INTEGER NOT NULL DEFAULT 0,
    text TEXT NOT NULL,
    method TEXT NOT NULL,               -- llm or extractive
    rolled_into INTEGER,
    created_at REAL NOT NULL
);
CREATE INDEX summaries_session ON summaries (session, character_id, level, id);

CREATE VIRTUAL TABLE summaries_fts USING fts5(tokens, owner);
CREATE TRIGGER summaries_ai AFTER INSERT ON summaries BEGIN
    INSERT INTO summaries_fts (rowid, tokens, owner) VALUES (new.id, mnemo_tokens(new.text), mnemo_owner(new.session || '/' || new.character_id));
END;
CREATE TRIGGER summaries_ad AFTER DELETE ON summaries BEGIN
    DELETE FROM summaries_fts WHERE rowid = old.id;
END;

-- Vector indexes (sqlite-vec). 256 dimensions fits the default model; bot.py rebuilds both
-- tables at the loaded model's size when another model is configured, then refills them.
CREATE VIRTUAL TABLE memories_vec USING vec0(
    memory_id INTEGER PRIMARY KEY,
    owner TEXT PARTITION KEY,
    embedding float[256] distance_metric=cosine
);
CREATE VIRTUAL TABLE summaries_vec USING vec0(
    summary_id INTEGER PRIMARY KEY,
    owner TEXT PARTITION KEY,
    embedding float[256] distance_metric=cosine
);

-- LLM use per user and day, for BOT_DAILY_TOKENS and the status command.
CREATE TABLE usage (
    day TEXT NOT NULL,
    user_id TEXT NOT NULL,
    calls INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, user_id)
);

-- What VISION_MODEL said a picture shows, by the SHA-256 of its bytes: a picture sent again
-- (a meme, a forwarded photo) is not fetched into the vision model twice.
CREATE TABLE pictures (
    hash TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    created_at REAL NOT NULL
);

-- Small settings: embed_model, embed_dim, lore hashes, the summary each chat was last followed up on.
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

PRAGMA user_version = 6;
