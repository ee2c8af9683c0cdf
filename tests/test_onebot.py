"""The core path: OneBot v11 over the real aiocqhttp server, the LLM over real HTTP, storage."""

import pytest

from conftest import Runner
from fakes import NapCat, run_bot, wait_for
import bot


def test_private_message_gets_reply_with_proper_roles(runner, napcat, llm):
    assert napcat.ask(111, "你好呀") == "echo:你好呀"
    req = llm.requests[-1]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test-secret-key-123"
    msgs = req["json"]["messages"]
    assert msgs[0]["role"] == "system" and "小满" in msgs[0]["content"]
    assert msgs[-1] == {"role": "user", "content": "你好呀"}
    assert all("你好呀" not in m["content"] for m in msgs if m["role"] == "system")


def test_history_goes_as_alternating_turns(runner, napcat, llm):
    napcat.ask(111, "第一句")
    napcat.ask(111, "第二句")
    msgs = llm.requests[-1]["json"]["messages"]
    turns = [m for m in msgs if m["role"] != "system"]
    assert [m["role"] for m in turns] == ["user", "assistant", "user"]
    assert [m["content"] for m in turns] == ["第一句", "echo:第一句", "第二句"]


def test_group_answers_only_when_addressed(runner, napcat, llm):
    napcat.event(222, "大家好", group_id=900)
    assert napcat.barrier(222, group_id=900, at_bot=True) == []
    mid = napcat.event(222, " 今天吃什么", group_id=900, at_bot=True, nickname="阿强")
    params = napcat.reply()
    segs = params["message"]
    assert params["group_id"] == 900
    assert segs[0] == {"type": "reply", "data": {"id": str(mid)}}
    assert segs[1] == {"type": "at", "data": {"qq": "222"}}
    assert segs[-1]["data"]["text"] == "echo:阿强：今天吃什么"
    # addressed by the character's name at the start
    napcat.event(222, "小满，在吗", group_id=900, nickname="阿强")
    assert napcat.reply_text().strip() == "echo:阿强：在吗"
    # another member @-ed, not the bot
    napcat.event(222, None, group_id=900, message=[{"type": "at", "data": {"qq": "333"}},
                                                   {"type": "text", "data": {"text": "你好"}}])
    assert napcat.barrier(222, group_id=900, at_bot=True) == []


def test_never_answers_itself(runner, napcat):
    napcat.event(napcat.self_id, "自己发的消息")
    assert napcat.barrier(111) == []


def test_llm_reply_with_cq_code_is_sent_as_text(runner, napcat, llm):
    llm.script.append("好的 [CQ:at,qq=all] 看过来 [CQ:image,file=http://x/y.jpg]")
    napcat.event(444, "发个公告")
    segs = napcat.reply()["message"]
    assert segs == [{"type": "text", "data": {"text": "好的 [CQ:at,qq=all] 看过来 [CQ:image,file=http://x/y.jpg]"}}]


def test_messages_stored_in_order_and_kept_after_restart(env, llm):
    r = Runner(env)
    c = NapCat(r.cfg.ONEBOT_PORT)
    for text in ("我叫小王", "我在学吉他", "今天下雨了"):
        c.ask(555, text)
    c.close()
    r.stop()
    r2 = Runner(env)
    try:
        rows = r2.db(lambda conn: conn.execute("SELECT role, text FROM messages WHERE session = 'p:555' ORDER BY id").fetchall())
        assert [(x[0], x[1]) for x in rows] == [("user", "我叫小王"), ("assistant", "echo:我叫小王"),
                                               ("user", "我在学吉他"), ("assistant", "echo:我在学吉他"),
                                               ("user", "今天下雨了"), ("assistant", "echo:今天下雨了")]
        c2 = NapCat(r2.cfg.ONEBOT_PORT)
        c2.ask(555, "还记得吗")
        turns = [m["content"] for m in llm.requests[-1]["json"]["messages"] if m["role"] != "system"]
        assert "今天下雨了" in turns and "echo:我在学吉他" in turns
        c2.close()
    finally:
        r2.stop()


def test_one_session_is_answered_in_order(runner, napcat, llm):
    llm.delay = 0.3
    napcat.event(666, "第0条")
    assert wait_for(lambda: llm.requests)
    for i in range(1, 4):
        napcat.event(666, f"第{i}条")
    # the three sent while the first was being answered are answered together, after it (a burst, issue 12)
    got = [napcat.reply_text() for _ in range(2)]
    assert got == ["echo:第0条", "echo:第1条\n第2条\n第3条"]


def test_different_users_are_served_concurrently(runner, llm, napcat):
    llm.delay = 1.0
    for u in range(10):
        napcat.event(7000 + u, f"并发{u}")
    got = sorted(napcat.reply_text(timeout=20) for _ in range(10))
    assert got == sorted(f"echo:并发{u}" for u in range(10))
    # the ten 1-second calls overlapped instead of queueing behind each other
    assert len(llm.requests) == 10 and llm.max_inflight >= 8


#: A blank database: its tables (not counting FTS5's and vec0's own shadow tables) and triggers.
BLANK_TABLES = {"sessions", "messages", "memories", "memory_history", "lore", "summaries", "usage", "meta", "pictures",
                "profiles", "messages_fts", "memories_fts", "summaries_fts", "memories_vec", "summaries_vec"}
BLANK_TRIGGERS = {"messages_ai", "messages_ad", "messages_au", "memories_ai", "memories_ad", "memories_au",
                  "memories_reexpand", "memories_profile_ad", "memories_profile_au", "summaries_ai", "summaries_ad"}


def test_blank_database_gets_exact_schema(tmp_path):
    conn = bot.db_connect(tmp_path / "x.db")
    listed = [(r["name"], r["type"]) for r in conn.execute("PRAGMA main.table_list") if not r["name"].startswith("sqlite_")]
    virtual = [name for name, kind in listed if kind == "virtual"]
    tables = {name for name, kind in listed if not any(name.startswith(v + "_") for v in virtual)}
    triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert (tables, triggers) == (BLANK_TABLES, BLANK_TRIGGERS)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == bot.SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_v5_database_gets_the_user_index_and_loses_nothing(tmp_path):
    """A v5 file (today's schema without messages_user) opens as v6: the index is there, one user's rows are found
    through it, and every row of every table is as it was."""
    path = tmp_path / "v5.db"
    conn = bot.db_connect(path)
    conn.execute("DROP INDEX messages_user")
    conn.execute("PRAGMA user_version = 5")
    for i in range(30):
        conn.execute("INSERT INTO messages (session, user_id, speaker, role, character_id, text, created_at) "
                     "VALUES (?, ?, '阿强', 'user', 'default', ?, 0)", (f"p:{i % 3}", str(i % 3), f"第{i}句：我住在北京"))
    conn.execute("INSERT INTO memories (user_id, type, text, created_at, updated_at) VALUES ('1', 'user_fact', "
                 "'我住在北京', 0, 0)")
    conn.execute("INSERT INTO summaries (session, character_id, first_msg, last_msg, text, method, created_at) "
                 "VALUES ('p:1', 'default', 1, 30, '此前，用户说住在北京。', 'llm', 0)")
    tables = ("messages", "memories", "summaries", "messages_fts", "memories_fts", "summaries_fts")
    before = {t: [tuple(r) for r in conn.execute(f"SELECT * FROM {t} ORDER BY rowid")] for t in tables}
    conn.close()
    conn = bot.db_connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == bot.SCHEMA_VERSION == 6
    assert {t: [tuple(r) for r in conn.execute(f"SELECT * FROM {t} ORDER BY rowid")] for t in tables} == before
    plan = " ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN SELECT DISTINCT session FROM messages "
                                                 "WHERE user_id = '1'"))
    assert plan == "SEARCH messages USING COVERING INDEX messages_user (user_id=?)"  # not SCAN messages
    assert conn.execute("SELECT count(*) FROM messages WHERE user_id = '1'").fetchone()[0] == 10
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_newer_database_is_refused(tmp_path):
    path = tmp_path / "new.db"
    bot.db_connect(path).execute("PRAGMA user_version = 99")
    with pytest.raises(bot.StorageError, match="newer than this bot.py.*Fix:"):
        bot.db_connect(path)


def test_terminal_chat_uses_the_same_pipeline(env, llm):
    p = run_bot("chat", "--user", "9", env=env, stdin="你好\n记住，我喜欢爬山\n你记得我什么\n")
    assert p.returncode == 0, p.stderr
    assert "小满: echo:你好" in p.stdout
    assert "好的，记住了：“我喜欢爬山”" in p.stdout
    assert "1. 我喜欢爬山" in p.stdout
    assert "vector search is off" in p.stdout


def test_port_in_use_is_a_clear_error(env):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        p = run_bot(env=dict(env, ONEBOT_PORT=str(s.getsockname()[1])), timeout=30)
    assert p.returncode == 1 and p.stderr.startswith("Error: can't listen on 127.0.0.1:") and "Fix:" in p.stderr


def _doctor_lines(p):
    return {line[6:].split(":")[0]: line[:4].strip() for line in p.stdout.splitlines() if line[:4] in ("ok  ", "FAIL")}


def test_doctor_checks_each_part(env, llm):
    p = run_bot("doctor", env=env)  # keyword-only (EMBED_MODEL=off) is a choice, not a failure: the lean Pi setup
    assert p.returncode == 0, p.stdout
    assert _doctor_lines(p) == {"Python": "ok", "SQLite extension loading": "ok", "sqlite-vec and FTS5": "ok",
                                "database": "ok", "embedding model": "ok", "characters": "ok", "LLM endpoint": "ok"}
    assert "embedding model: off (EMBED_MODEL=off)" in p.stdout
    # LLM_TIMEOUT 0.5: nothing listens on port 9; the retries' waits (0.5 s, 1 s) would not fit, so it says so at once
    p = run_bot("doctor", env=dict(env, LLM_BASE_URL="http://127.0.0.1:9/v1", EMBED_MODEL="/nonexistent/model",
                                   LLM_TIMEOUT="0.5"))
    assert p.returncode == 1
    fails = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 2 and all("Error:" in f and "Fix:" in f for f in fails), p.stdout


def test_doctor_with_the_model_is_all_ok(env_vec, llm):
    p = run_bot("doctor", env=env_vec)
    assert p.returncode == 0 and set(_doctor_lines(p).values()) == {"ok"}, p.stdout + p.stderr


def test_queued_message_sees_the_reply_before_it_and_the_new_character(runner, napcat, llm):
    llm.delay = 0.5
    napcat.event(667, "第一问")
    assert wait_for(lambda: llm.requests)  # sent before the first call, the two would be answered together
    napcat.event(667, "第二问")
    assert [napcat.reply_text(), napcat.reply_text()] == ["echo:第一问", "echo:第二问"]
    turns = [m["content"] for m in llm.chat_requests()[-1]["json"]["messages"] if m["role"] != "system"]
    assert turns == ["第一问", "echo:第一问", "第二问"]
    llm.delay = 0.0
    napcat.event(667, "切换角色 knight")
    napcat.event(667, "你是谁")
    napcat.reply_text()
    assert napcat.reply_text() == "echo:你是谁"
    assert "【角色】艾德蒙" in llm.chat_requests()[-1]["json"]["messages"][0]["content"]


@pytest.mark.parametrize("contents,sent", [
    (["<think>想一想</think>你好！"], "你好！"),
    (["<think>想了很久，被 max_tokens 截断"], "echo:你好"),  # asked once more, with room (test_providers.py)
    (["<think>想了很久，被 max_tokens 截断"] * 2, bot.LLM_DOWN_REPLY),
    (["<think>嗯</think>"] * 2, bot.LLM_DOWN_REPLY),
])
def test_reasoning_models_thinking_is_not_sent(runner, napcat, llm, contents, sent):
    llm.script += contents
    assert napcat.ask(668, "你好") == sent
