"""忘记关于我的一切 → 确认删除, and a superuser's /forget_user QQ (#20 point 8: forgotten means gone from every
prompt): the user's memories, their private chats with every character and those chats' summaries, their lines in
groups and the bot's replies to them, and the group summaries' sentences that name them or say their memories are
gone; other members' turns, memories and the group's summaries stay, and the group is summarised on as before.
Everything runs through the real bot (NapCat fake on the WebSocket, the fake LLM over HTTP, a real SQLite file)."""

import json

import pytest

from conftest import Runner
from fakes import NapCat, is_summary_request, wait_for
import bot

A, B, GROUP = 7001, 7002, 905
#: What the wiped user said in their private chat (each turn's echo is the bot's reply that repeats it).
A_PRIVATE = ["我下周三要去面试", "我最近在学吉他", "面试的公司在望京", "吉他是雅马哈的"]
#: What they said to the bot in the group, and a line to nobody in particular.
A_GROUP = ["我在准备考研", "考研要考数学二"]
A_AMBIENT = "我家猫叫咪咪"
B_GROUP = ["今晚谁开黑", "开黑玩什么好", "王者荣耀吧"]
#: The summaries the fake LLM writes: the private one, and the group's that names A and quotes A's memory.
PRIVATE_SUMMARY = "此前，用户说下周三要去面试。用户在学吉他。"
GROUP_SUMMARY = "此前，阿强说自己在准备考研。其中一位对青霉素过敏。小红问今晚谁开黑。大家商量玩王者荣耀。"
GROUP_SUMMARY_LATER = "此前，小红说周末想去爬山。"
#: Words of A's that must be in no request after the wipe (阿强 itself labels A's new line in the group).
A_WORDS = ("面试", "吉他", "望京", "雅马哈", "考研", "数学二", "咪咪", "青霉素", "强哥", "阿强说", "echo:我")


@pytest.fixture
def runner(env):
    r = Runner(dict(env, SUMMARY_EVERY="3", FOLLOW_UP_HOURS="0"))
    yield r
    r.stop()


@pytest.fixture
def napcat(runner):
    c = NapCat(runner.cfg.ONEBOT_PORT)
    yield c
    c.close()


def _summaries(llm):
    def answer(body):
        if not is_summary_request(body):
            return None
        said = body["messages"][-1]["content"]
        if "面试" in said:
            return {"reply": PRIVATE_SUMMARY}
        if "考研" in said:
            return {"reply": GROUP_SUMMARY}
        if "爬山" in said:
            return {"reply": GROUP_SUMMARY_LATER}
        return None
    llm.answer = answer


def _chat_before_the_wipe(runner, napcat, llm):
    """A and B each remember something, chat in private and in one group, and both chats get summarised."""
    _summaries(llm)
    group = {"group_id": GROUP, "at_bot": True}
    assert napcat.ask(A, "记住，我对青霉素过敏").startswith("好的")
    assert napcat.ask(A, "记住，以后叫我强哥").startswith("好的")
    assert napcat.ask(B, "记住，我住在西安").startswith("好的")
    for text in A_PRIVATE:
        napcat.ask(A, text)
    napcat.ask(B, "我喜欢爬山")
    napcat.event(A, A_AMBIENT, group_id=GROUP, card="阿强")
    napcat.ask(A, A_GROUP[0], card="阿强", **group)
    napcat.ask(B, B_GROUP[0], card="小红", **group)
    napcat.ask(A, A_GROUP[1], card="阿强", **group)
    for text in B_GROUP[1:]:
        napcat.ask(B, text, card="小红", **group)
    wait_for(lambda: runner.rows("SELECT id FROM summaries WHERE session = ?", f"p:{A}"))
    wait_for(lambda: runner.rows("SELECT id FROM summaries WHERE session = ?", f"g:{GROUP}"))
    assert runner.rows("SELECT text FROM summaries WHERE session = ?", f"g:{GROUP}") == [{"text": GROUP_SUMMARY}]


def _sent(llm):
    return json.dumps(llm.chat_requests()[-1]["json"]["messages"], ensure_ascii=False)


def _nothing_of_a_is_left(runner, napcat, llm):
    """The next request for A, in private and in the group, carries nothing A said before; B's turns, memory and the
    group's summary (without A's sentences) still reach B's prompts; the indexes hold none of A's words."""
    napcat.ask(A, "你好呀")
    sent = _sent(llm)
    assert not [w for w in A_WORDS if w in sent], sent
    napcat.ask(A, "大家晚上好", group_id=GROUP, at_bot=True, card="阿强")
    sent = _sent(llm)
    assert not [w for w in A_WORDS if w in sent], sent
    assert "今晚谁开黑" in sent and "小红问今晚谁开黑。大家商量玩王者荣耀。" in sent, sent  # B's turns, the summary's rest
    napcat.ask(B, "你还记得我住哪吗")
    sent = _sent(llm)
    assert "我住在西安" in sent and "我喜欢爬山" in sent, sent
    assert runner.rows("SELECT text FROM memories WHERE user_id = ?", str(B)) == [{"text": "我住在西安"}]
    for word, table in [(w, t) for w in ("面试", "吉他", "考研", "青霉") for t in ("messages_fts", "summaries_fts")] + \
            [("阿强", "summaries_fts")]:  # A's new line in the group has their card
        assert runner.rows(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", f'tokens : "{word}"') == [], word
    assert runner.rows("SELECT id FROM summaries WHERE session = ?", f"p:{A}") == []
    assert runner.rows("SELECT count(*) AS n FROM summaries_vec WHERE summary_id NOT IN (SELECT id FROM summaries)") \
        == [{"n": 0}]
    assert runner.rows("SELECT id FROM memories WHERE user_id = ?", str(A)) == []
    assert runner.rows("SELECT id FROM memory_history WHERE user_id = ?", str(A)) == []
    assert runner.rows("SELECT count(*) AS n FROM memories_vec WHERE memory_id NOT IN (SELECT id FROM memories)") \
        == [{"n": 0}]


def _the_group_is_summarised_on(runner, napcat, llm):
    """After the wipe the group's next window is summarised and reaches the group's prompt."""
    for text in ("周末想去爬山", "有人一起吗", "去香山吧", "几点出发"):
        napcat.ask(B, text, group_id=GROUP, at_bot=True, card="小红")
    wait_for(lambda: any(r["text"] == GROUP_SUMMARY_LATER for r in runner.rows(
        "SELECT text FROM summaries WHERE session = ?", f"g:{GROUP}")))
    napcat.ask(B, "那就这么定了", group_id=GROUP, at_bot=True, card="小红")
    assert GROUP_SUMMARY_LATER in _sent(llm)


def test_forget_everything_leaves_nothing_of_the_user_in_any_prompt(runner, napcat, llm):
    _chat_before_the_wipe(runner, napcat, llm)
    asked = napcat.ask(A, "忘记关于我的一切")
    assert asked.startswith("确定要删除我记得的关于你的全部2条记忆吗") and "私聊记录" in asked
    assert napcat.ask(A, "确认删除") == "好的，关于你的2条记忆都已经删除了，我们的私聊记录和总结、你在群里跟我说过的话也删了。"
    # what is left of A: the 确认删除 itself (the newest message then, kept so no id is used twice) and the reply
    assert [r["text"] for r in runner.rows("SELECT text FROM messages WHERE user_id = ? ORDER BY id", str(A))] == \
        ["确认删除", "好的，关于你的2条记忆都已经删除了，我们的私聊记录和总结、你在群里跟我说过的话也删了。"]
    _nothing_of_a_is_left(runner, napcat, llm)
    _the_group_is_summarised_on(runner, napcat, llm)


def test_forget_user_by_a_superuser_does_the_same(runner, napcat, llm):
    _chat_before_the_wipe(runner, napcat, llm)
    assert napcat.ask(42, "/forget_user 7001") == "已删除 7001 的 2 条记忆和聊天记录。"
    assert runner.rows("SELECT text FROM messages WHERE user_id = ?", str(A)) == []
    _nothing_of_a_is_left(runner, napcat, llm)
    _the_group_is_summarised_on(runner, napcat, llm)


def test_a_user_with_chats_but_no_memories_can_wipe_them(runner, napcat, llm):
    """No memory, but a private chat: the wipe is still offered (the chat is theirs to delete)."""
    napcat.ask(A, "我下周三要去面试")
    asked = napcat.ask(A, "忘记关于我的一切")
    assert asked.startswith("确定要删除")
    assert napcat.ask(A, "确认删除").startswith("好的，关于你的0条记忆都已经删除了")
    napcat.ask(A, "你好")
    assert "面试" not in _sent(llm)


def test_the_wipe_is_done_in_steps_and_keeps_the_rollups_consistent(tmp_path, monkeypatch):
    """memory_wipe_step deletes WIPE_BATCH rows a statement, as many as WIPE_STEP_SECONDS allow (0: one); the
    private chat's level-0 summaries and the rollup they were folded into go together; a group summary that is all
    about the user says FORGOTTEN_TEXT, and the group's rollup above it loses the user's sentence too; a sentence of
    their memory's words about another member stays."""
    monkeypatch.setattr(bot, "WIPE_BATCH", 50)
    monkeypatch.setattr(bot, "WIPE_STEP_SECONDS", 0)
    conn = bot.db_connect(tmp_path / "w.db")
    ins = ("INSERT INTO messages (session, user_id, speaker, role, character_id, text, created_at) "
           "VALUES (?, ?, ?, 'user', 'default', ?, 0)")
    with bot.db_tx(conn):
        for i in range(120):
            conn.execute(ins, ("p:1", "1", "阿强", f"第{i}句私聊"))
            conn.execute(ins, ("g:9", "1" if i % 2 else "2", "阿强" if i % 2 else "小红", f"群里第{i}句"))
        conn.execute(ins, ("g:9", "1", "🐱🐱", "喵"))  # a card of emoji only: nothing to look for, no error
        conn.execute(ins, ("g:9", "2", "小红", "最后一句"))
        summ = ("INSERT INTO summaries (session, character_id, first_msg, last_msg, level, text, method, rolled_into, "
                "created_at) VALUES (?, 'default', ?, ?, ?, ?, 'llm', ?, 0)")
        for level, rolled in ((1, None), (0, 1), (0, 1)):
            conn.execute(summ, ("p:1", 1, 100, level, "此前，用户说了很多。", rolled))
        top = conn.execute(summ, ("g:9", 2, 240, 1, "此前，阿强说了很多。小红说了一些。", None)).lastrowid
        conn.execute(summ, ("g:9", 2, 100, 0, "此前，阿强说了很多。", top))
        conn.execute(summ, ("g:9", 102, 240, 0, "此前，小红说了一些。", top))
        conn.execute(summ, ("g:9", 102, 120, 0, "此前，小红说她对青霉素过敏。其中一位对青霉素过敏。小红说1月去爬山。", None))
        bot.memory_insert(conn, None, user_id="1", text="我对青霉素过敏", subject="我", attribute="过敏", value="青霉素")
    n, plan = bot.memory_wipe_start(conn, "1")
    steps = 1
    while not bot.memory_wipe_step(conn, plan):
        steps += 1
    assert steps >= 1 + 2 + 4 + 1  # the start, the summary queries, 180 messages 50 at a time, the late look
    assert conn.execute("SELECT count(*) FROM messages WHERE user_id = '1'").fetchone()[0] == 0  # the newest is 小红's
    assert conn.execute("SELECT count(*) FROM messages WHERE user_id = '2'").fetchone()[0] == 61
    assert conn.execute("SELECT count(*) FROM summaries WHERE session = 'p:1'").fetchone()[0] == 0
    assert [r[0] for r in conn.execute("SELECT text FROM summaries WHERE session = 'g:9' ORDER BY id")] == \
        ["此前，小红说了一些。", bot.FORGOTTEN_TEXT, "此前，小红说了一些。", "此前，小红说她对青霉素过敏。小红说1月去爬山。"]  # 小红's stays; QQ 1 is no QQ number
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
