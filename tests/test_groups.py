"""Group chats and QQ habits (issue 12), through the real WebSocket and the fake LLM: what the group
just said, bursts answered together, replies split like a person types, pokes and 新话题, pictures
described by a vision model, following up on a plan after a while away."""

import base64
import json
import time

import pytest

from conftest import Runner
from fakes import NapCat, PictureServer, is_summary_request, png, system_part, text_of, v1_database, wait_for
import bot

GROUP = 900


def chat_messages(llm, n=-1):
    """The messages of the n-th reply request (not summaries)."""
    return llm.chat_requests()[n]["json"]["messages"]


def group_block(messages):
    """The 群里刚才的聊天 lines of a prompt, or None."""
    found = system_part(messages, "【群里刚才的聊天】")
    return found.splitlines()[1:] if found else None


def start(env, **settings):
    r = Runner(dict(env, **{k: str(v) for k, v in settings.items()}))
    return r, NapCat(r.cfg.ONEBOT_PORT)


# 1. Group context ############################################################

def test_unaddressed_group_lines_go_into_the_next_addressed_prompt(runner, napcat, llm):
    napcat.event(1230222, "今晚谁开黑", group_id=GROUP, card="阿强", nickname="qiang")
    napcat.event(1230333, "我来，九点", group_id=GROUP, nickname="小红")  # no card: the nickname
    napcat.event(1230444, "我也来\n带上我", group_id=GROUP, card="老王(0222)")  # can't pass as 阿强
    assert napcat.barrier(1230222, group_id=GROUP, at_bot=True, card="阿强") == []
    lines = group_block(chat_messages(llm))
    assert lines == ["阿强(0222)：今晚谁开黑", "小红(0333)：我来，九点", "老王(0444)：我也来 带上我"]
    napcat.event(1230222, " 你来吗", group_id=GROUP, at_bot=True, card="阿强")
    napcat.reply()
    msgs = chat_messages(llm)
    assert msgs[-1] == {"role": "user", "content": "阿强：你来吗"}  # the addressed message stays last
    assert group_block(msgs) == lines  # the barrier was addressed: not a line
    rows = runner.rows("SELECT kind, count(*) AS n FROM messages WHERE session = ? GROUP BY kind ORDER BY kind", f"g:{GROUP}")
    assert rows == [{"kind": "ambient", "n": 3}, {"kind": "chat", "n": 4}]


def test_group_lines_stay_in_their_group_and_out_of_private_chats(runner, napcat, llm):
    napcat.event(1230222, "秘密口令是蓝鲸", group_id=GROUP, card="阿强")
    assert napcat.barrier(1230555, group_id=901, at_bot=True) == []
    assert group_block(chat_messages(llm)) is None  # another group
    assert napcat.barrier(1230222) == []
    assert group_block(chat_messages(llm)) is None  # a private chat, even the same speaker's
    assert all("蓝鲸" not in m["content"] for r in llm.requests for m in r["json"]["messages"])
    # never searched: not in the messages' full-text index, so no recall and no summary finds it
    assert runner.rows("SELECT count(*) AS n FROM messages_fts WHERE messages_fts MATCH ?",
                       " ".join(bot.text_tokens("蓝鲸"))) == [{"n": 0}]
    assert napcat.barrier(1230222, group_id=GROUP, at_bot=True) == []
    assert group_block(chat_messages(llm)) == ["阿强(0222)：秘密口令是蓝鲸"]


def test_group_lines_never_reach_summaries(env, llm):
    r, c = start(env, SUMMARY_EVERY=2)
    try:
        c.event(1230222, "我的银行卡密码是七七七", group_id=GROUP, card="阿强")
        for text in ("今天天气不错适合爬山", "周末去香山看红叶", "红叶什么时候最好看"):
            c.event(1230222, text, group_id=GROUP, at_bot=True, card="阿强")
            c.reply()
        summaries = wait_for(lambda: [q for q in llm.requests if is_summary_request(q["json"])])
        assert summaries
        transcript = summaries[0]["json"]["messages"][-1]["content"]
        assert "爬山" in transcript and "七七七" not in transcript
    finally:
        c.close()
        r.stop()


def test_only_the_last_group_context_lines_and_keep_per_group(env, llm):
    r, c = start(env, GROUP_CONTEXT=3, GROUP_CONTEXT_KEEP=5)
    try:
        for i in range(8):
            c.event(1230222, f"第{i}句", group_id=GROUP, card="阿强")
        c.event(1230222, "隔壁群", group_id=901, card="阿强")
        assert c.barrier(1230222, group_id=GROUP, at_bot=True) == []
        assert group_block(chat_messages(llm)) == ["阿强(0222)：第5句", "阿强(0222)：第6句", "阿强(0222)：第7句"]
        kept = r.rows("SELECT text FROM messages WHERE session = ? AND kind = 'ambient' ORDER BY id", f"g:{GROUP}")
        assert [x["text"] for x in kept] == [f"第{i}句" for i in range(3, 8)]  # the oldest were deleted
        assert r.rows("SELECT count(*) AS n FROM messages WHERE session = 'g:901'") == [{"n": 1}]
    finally:
        c.close()
        r.stop()


def test_group_context_off_stores_nothing(env, llm):
    r, c = start(env, GROUP_CONTEXT=0)
    try:
        c.event(1230222, "大家好", group_id=GROUP, card="阿强")
        assert c.barrier(1230222, group_id=GROUP, at_bot=True) == []
        assert group_block(chat_messages(llm)) is None
        assert r.rows("SELECT count(*) AS n FROM messages WHERE kind = 'ambient'") == [{"n": 0}]
    finally:
        c.close()
        r.stop()


def test_group_lines_do_not_count_as_the_user_repeating_a_fact(runner, napcat, llm):
    """The offer to remember (said three times) counts what was said to the bot, not to the group."""
    for _ in range(3):
        napcat.event(1230222, "我对花生过敏", group_id=GROUP, card="阿强")
    napcat.event(1230222, " 我对花生过敏", group_id=GROUP, at_bot=True, card="阿强")
    assert "要我帮你记住吗" not in napcat.reply_text()


def test_twenty_group_lines_cost_a_few_hundred_prompt_tokens():
    """The figure in the README: 20 typical group lines (8-20 characters each) and the head."""
    texts = ["今晚谁开黑", "我来，九点上线", "上次那个副本太难了吧", "哈哈哈哈", "明天还要上班呢", "周末去不去爬山",
             "我看天气预报说周六下雨", "那就周日", "有人看了昨天的比赛吗", "看了，最后一分钟绝杀", "太刺激了",
             "晚饭吃什么好", "楼下新开了一家火锅店", "人均多少钱", "大概一百左右吧", "可以，下班一起去",
             "[图片]", "这猫也太胖了", "是我家的，十二斤", "羡慕"]
    lines = [bot.prompt_group_line(str(1230000 + i * 37), name, t)
             for i, (name, t) in enumerate(zip(["阿强", "小红", "老王", "Mike"] * 5, texts))]
    part, used = bot._group_part(lines, 0, 2000)
    assert part.count("\n") == 20
    assert 220 <= used <= 300, used  # measured: 260 (bot.text_count_tokens: CJK characters count one each)


def test_v1_messages_are_rebuilt_for_ambient_lines(tmp_path):
    """The v1 -> v2 migration rebuilds messages (the kind CHECK changed): rows, index, FTS triggers."""
    path = tmp_path / "v1.db"
    old = v1_database(path)
    old.execute("INSERT INTO messages (session, user_id, speaker, role, character_id, text, created_at) "
                "VALUES ('g:1', '5', '阿强', 'user', 'xiaoman', '我们去爬山吧', 0)")
    old.commit()
    old.close()
    conn = bot.db_connect(path)
    owner = bot.text_owner_token("g:1")
    assert [r[0] for r in conn.execute("SELECT text FROM messages")] == ["我们去爬山吧"]
    assert conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?",
                        (f"爬山 AND owner:{owner}",)).fetchone()[0] == 1
    bot.session_store_ambient(conn, "g:1", "6", "小红", "好呀", None, 500)
    assert conn.execute("SELECT count(*) FROM messages_fts").fetchone()[0] == 1  # ambient lines stay unindexed
    conn.execute("DELETE FROM messages WHERE text = '我们去爬山吧'")
    assert conn.execute("SELECT count(*) FROM messages_fts").fetchone()[0] == 0
    blank = bot.db_connect(tmp_path / "blank.db")
    sql = lambda db: {r[0]: " ".join(r[1].split()) for r in db.execute(
        "SELECT name, sql FROM sqlite_master WHERE tbl_name IN ('messages', 'sessions') AND sql IS NOT NULL")}
    assert sql(conn).keys() == sql(blank).keys()
    assert "'ambient'" in sql(conn)["messages"] and "topic_from" in sql(conn)["sessions"]


# 2. Bursts ###################################################################

def test_messages_sent_while_the_bot_answers_are_answered_together(runner, napcat, llm):
    llm.delay = 0.5
    napcat.event(321, "在吗")
    assert wait_for(lambda: llm.chat_requests())  # the first reply is being written
    for text in ("我今天好累", "加班到十点", "还没吃饭"):
        napcat.event(321, text)
    assert napcat.reply_text() == "echo:在吗"
    assert napcat.reply_text() == "echo:我今天好累\n加班到十点\n还没吃饭"
    llm.delay = 0.0
    assert napcat.barrier(321) == []  # one reply for the three
    assert len(llm.chat_requests()) == 3
    burst = chat_messages(llm, 1)
    assert burst[-1] == {"role": "user", "content": "我今天好累\n加班到十点\n还没吃饭"}
    assert [m["content"] for m in burst if m["role"] != "system"] == ["在吗", "echo:在吗", burst[-1]["content"]]
    rows = runner.rows("SELECT role, text FROM messages WHERE session = 'p:321' ORDER BY id")[:6]
    assert [r["text"] for r in rows if r["role"] == "user"] == ["在吗", "我今天好累", "加班到十点", "还没吃饭"]  # each on its own
    assert [r["text"] for r in rows if r["role"] == "assistant"] == ["echo:在吗", "echo:我今天好累\n加班到十点\n还没吃饭"]


def test_a_single_message_does_not_wait(runner, napcat, llm):
    start_at = time.monotonic()
    assert napcat.ask(322, "你好") == "echo:你好"
    # no waiting window before the LLM call (a debounce would be seconds; the margin is for a loaded machine)
    assert llm.chat_requests()[-1]["time"] - start_at < 1.5


def test_commands_in_a_burst_are_answered_one_by_one(runner, napcat, llm):
    llm.delay = 0.5
    napcat.event(323, "在吗")
    assert wait_for(lambda: llm.chat_requests())
    for text in ("记住，我住在北京", "你记得我什么", "今天好冷", "要下雪了"):
        napcat.event(323, text)
    replies = [napcat.reply_text() for _ in range(4)]
    assert replies[0] == "echo:在吗"
    assert "记住了" in replies[1] and "我住在北京" in replies[2]
    assert replies[3] == "echo:今天好冷\n要下雪了"
    llm.delay = 0.0
    assert napcat.barrier(323) == []


def test_a_burst_ends_at_a_command(runner, napcat, llm):
    llm.delay = 0.5
    napcat.event(324, "在吗")
    assert wait_for(lambda: llm.chat_requests())
    for text in ("今天好冷", "记住，我住在北京", "要下雪了"):
        napcat.event(324, text)
    replies = [napcat.reply_text() for _ in range(4)]
    assert replies[:2] == ["echo:在吗", "echo:今天好冷"] and "记住了" in replies[2] and replies[3] == "echo:要下雪了"


def test_in_a_group_only_the_same_speakers_messages_join_a_burst(runner, napcat, llm):
    llm.delay = 0.5
    napcat.event(325, " 在吗", group_id=GROUP, at_bot=True, card="阿强")
    assert wait_for(lambda: llm.chat_requests())
    napcat.event(325, " 问个事", group_id=GROUP, at_bot=True, card="阿强")
    napcat.event(326, " 我也在", group_id=GROUP, at_bot=True, card="小红")
    napcat.event(325, " 明天放假吗", group_id=GROUP, at_bot=True, card="阿强")
    got = [napcat.reply() for _ in range(3)]
    # 小红's reply is written beside 阿强's first (FairLock's slots), seeing his lines not yet answered; his two later
    # ones wait for his first and then go as one burst
    texts = [text_of(p).strip() for p in got]
    assert texts[0] == "echo:阿强：在吗" and texts[1].endswith("小红：我也在") and texts[2] == "echo:阿强：问个事\n明天放假吗"
    assert got[1]["message"][1] == {"type": "at", "data": {"qq": "326"}}
    llm.delay = 0.0
    assert napcat.barrier(325, group_id=GROUP, at_bot=True) == []


# 3. Replies like a person types ##############################################

@pytest.fixture
def split_env(env, monkeypatch):
    """REPLY_SPLIT on, with short pauses (the real ones are 0.5-1.5 s)."""
    monkeypatch.setattr(bot, "SPLIT_PAUSE_RANGE", (0.02, 0.05))
    return dict(env, REPLY_SPLIT="1")


def test_a_short_reply_goes_out_as_a_few_messages_in_order(split_env, llm):
    r, c = start(split_env)
    try:
        llm.script.append("好呀！今天去哪玩？我请客。")
        c.event(331, "周末有空吗")
        assert [c.reply_text() for _ in range(3)] == ["好呀！", "今天去哪玩？", "我请客。"]
        assert c.barrier(331) == []
        assert r.rows("SELECT text FROM messages WHERE session = 'p:331' AND role = 'assistant'")[0] == {
            "text": "好呀！今天去哪玩？我请客。"}  # stored once, whole
        llm.script.append("行啊。你定时间吧。")
        mid = c.event(332, " 周末有空吗", group_id=GROUP, at_bot=True, card="阿强")
        first, second = c.reply(), c.reply()
        assert first["message"][:2] == [{"type": "reply", "data": {"id": str(mid)}}, {"type": "at", "data": {"qq": "332"}}]
        assert text_of(first).strip() == "行啊。"
        assert second["message"] == [{"type": "text", "data": {"text": "你定时间吧。"}}]  # no second quote or @
    finally:
        c.close()
        r.stop()


@pytest.mark.parametrize("reply", [
    "我想了想，" + "这件事情其实没有那么简单，需要从好几个方面来考虑。" * 7,  # longer than 150 characters
    "可以这样做：\n先打开设置。\n再点关于。",  # lines
    "用 `git log` 看看。然后再说。",  # code
    "1. 先睡觉。2. 再起床。",  # a list
])
def test_long_code_and_laid_out_replies_go_whole(split_env, llm, reply):
    r, c = start(split_env)
    try:
        llm.script.append(reply)
        assert c.ask(333, "怎么办") == reply
        assert c.barrier(333) == []
    finally:
        c.close()
        r.stop()


def test_split_parts_come_with_a_typing_pause_and_the_first_without_delay(env, llm):
    """The real pauses: 0.5-1.5 s scaled to the part's length; the first part is not delayed."""
    whole = "好呀！今天天气真好，我们一起去公园散步吧？"
    timings = {}
    for split in ("0", "1"):
        r, c = start(env, REPLY_SPLIT=split)
        try:
            llm.script.append(whole)
            t0 = time.perf_counter()
            c.event(334, "出去玩吗")
            got = c.wait_replies(2 if split == "1" else 1, 10)
            timings[split] = [t - t0 for _, t in got]
        finally:
            c.close()
            r.stop()
    first_whole, (first_part, second_part) = timings["0"][0], timings["1"]
    assert first_part - first_whole < 0.45  # the first part is not held back by the shortest pause (0.5 s)
    pause = second_part - first_part
    # '今天天气真好，我们一起去公园散步吧？' (18 characters): 0.9 s; a loaded machine only adds to it
    assert 0.5 * 0.95 <= pause <= 1.5 + 1.0, pause


# 4. Poke and 新话题 ##########################################################

def test_a_poke_at_the_bot_gets_a_short_in_character_reply(runner, napcat, llm):
    napcat.poke(341)
    assert napcat.reply_text() == "echo:" + bot.POKE_TEXT
    assert chat_messages(llm)[-1] == {"role": "user", "content": "[对方戳了戳你]"}
    assert "小满" in chat_messages(llm)[0]["content"]  # the character answers
    napcat.event(342, "大家好", group_id=GROUP, card="阿强")
    assert napcat.barrier(342, group_id=GROUP, at_bot=True, card="阿强") == []
    napcat.poke(342, group_id=GROUP)
    sent = napcat.reply()
    assert sent["group_id"] == GROUP and sent["message"] == [{"type": "text", "data": {"text": "echo:阿强：[对方戳了戳你]"}}]
    assert group_block(chat_messages(llm)) == ["阿强(342)：大家好"]
    napcat.poke(343, group_id=GROUP, target_id=99999)  # one member poking another
    assert napcat.barrier(343, group_id=GROUP, at_bot=True) == []
    rows = runner.rows("SELECT role, text FROM messages WHERE session = 'p:341' ORDER BY id")
    assert [(r["role"], r["text"]) for r in rows] == [("user", "[对方戳了戳你]"), ("assistant", "echo:[对方戳了戳你]")]


def test_pokes_count_toward_the_rate_limit(env, llm):
    r, c = start(env, BOT_RATE_LIMIT=1)
    try:
        assert c.ask(344, "你好") == "echo:你好"
        c.poke(344)
        assert "太快" in c.reply_text()
        assert len(llm.chat_requests()) == 1
    finally:
        c.close()
        r.stop()


@pytest.mark.parametrize("command", ["新话题", "/new", "换个话题！"])
def test_new_topic_starts_without_the_old_turns_and_keeps_summaries_and_memories(env, llm, command):
    r, c = start(env, SUMMARY_EVERY=10)
    try:
        assert "记住了" in c.ask(351, "记住，我养了一只猫叫团子")
        c.ask(351, "我最近在学做蛋糕，第一次烤的戚风塌了")
        c.ask(351, "明天想试试巧克力口味的")
        assert c.ask(351, command) == "好，换个话题吧。想聊点什么？"
        # the window is closed at once, though shorter than SUMMARY_EVERY, and summarised in the background
        summary = wait_for(lambda: r.rows("SELECT text, last_msg FROM summaries WHERE session = 'p:351'"))
        assert summary and "戚风" in summary[0]["text"]
        c.ask(351, "团子今天又调皮了")
        msgs = chat_messages(llm)
        assert [m["content"] for m in msgs if m["role"] != "system"] == ["团子今天又调皮了"]  # no old raw turns
        reference = system_part(msgs, "参考资料")
        assert "戚风" in reference  # the summary stays
        assert "我养了一只猫叫团子" in reference  # and the memory
        c.ask(351, "它还咬我拖鞋")  # the new topic's own turns come back as usual
        assert [m["content"] for m in chat_messages(llm) if m["role"] != "system"] == [
            "团子今天又调皮了", "echo:团子今天又调皮了", "它还咬我拖鞋"]
        kinds = r.rows("SELECT kind FROM messages WHERE text = ?", command)
        assert kinds == [{"kind": "command"}]  # out of recall and summaries
    finally:
        c.close()
        r.stop()


def test_a_commands_answer_goes_whole(split_env, llm):
    r, c = start(split_env)
    try:
        c.ask(335, "记住，我住在北京")
        reply = c.ask(335, "更正一下，我住在天津")
        assert "天津" in reply and len(bot.onebot_split(reply)) > 1, reply  # would split, were it chat
        assert c.barrier(335) == []
    finally:
        c.close()
        r.stop()


# Group memory ##################################################################

def test_group_memory_reaches_that_group_only_and_its_owners_may_change_it(runner, llm):
    """记住，本群… is the group's: in its prompts for everyone, not in private or another group; its
    author, the group's owner or admins and superusers may change it, nobody else."""
    nc = NapCat(runner.cfg.ONEBOT_PORT)
    try:
        def ask(user, text, group=901, role="member"):
            nc.event(user, text, group_id=group, at_bot=True, role=role) if group else nc.event(user, text)
            return nc.reply_text().strip()
        assert "只有群主、群管理员" in ask(71, "记住，本群每周五晚上九点开黑")  # MEMORY_GROUP_WRITERS=admins
        assert "本群记住了：“本群每周五晚上九点开黑”" in ask(71, "记住，本群每周五晚上九点开黑", role="admin")
        assert "1. 本群每周五晚上九点开黑" in ask(72, "本群记得什么")
        ask(72, "周五有活动吗")
        assert "本群每周五晚上九点开黑" in "".join(m["content"] for m in llm.chat_requests()[-1]["json"]["messages"]
                                             if m["role"] == "system")
        ask(72, "周五有活动吗", group=902)
        assert "开黑" not in json.dumps(llm.chat_requests()[-1]["json"], ensure_ascii=False)
        ask(72, "周五有活动吗", group=None)
        assert "开黑" not in json.dumps(llm.chat_requests()[-1]["json"], ensure_ascii=False)
        assert "只有记下它的人、群主或管理员能删" in ask(73, "忘记本群第1条")
        assert "已忘记" in ask(74, "忘记本群第1条", role="admin")
        assert "本群还没有" in ask(72, "本群记得什么")
        assert "要在群里说" in ask(71, "本群记得什么", group=None)
        assert runner.rows("SELECT count(*) AS n FROM memories WHERE user_id = '71'") == [{"n": 0}]  # not a private fact
    finally:
        nc.close()


@pytest.mark.parametrize("listing", ["你记得我们群什么", "咱们群你记得啥", "群里你都记得些啥"])
def test_group_facts_are_listed_and_forgotten_the_way_people_ask(runner, llm, listing):
    nc = NapCat(runner.cfg.ONEBOT_PORT)
    try:
        def ask(user, text, role="member"):
            nc.event(user, text, group_id=905, at_bot=True, role=role)
            return nc.reply_text().strip()
        ask(81, "记住，本群每周五晚上九点开黑", role="admin")
        ask(81, "记住，本群群规是不许发广告", role="admin")
        ask(82, "记住，本群周六晚上也开黑", role="owner")
        assert "1. 本群每周五晚上九点开黑" in ask(83, listing) and "3. 本群周六晚上也开黑" in ask(83, listing)
        assert "没有说到“团建”" in ask(81, "忘记本群团建的事")  # nothing fits: nothing deleted
        both = ask(81, "忘记本群开黑的事")  # two fit: the numbers, nothing deleted yet
        assert "1. 本群每周五晚上九点开黑" in both and "3. 本群周六晚上也开黑" in both and "忘记本群第N条" in both
        assert "只有记下它的人、群主或管理员能删" in ask(83, "删掉本群关于群规的那条")
        assert "已忘记" in ask(81, "把本群群规那条删了")
        assert [r["text"] for r in runner.rows("SELECT text FROM memories WHERE subject = '本群' ORDER BY id")] == [
            "本群每周五晚上九点开黑", "本群周六晚上也开黑"]
    finally:
        nc.close()


# 5. Pictures ###################################################################

CAT = "一只橘猫趴在键盘上"


@pytest.fixture
def pictures():
    server = PictureServer()
    yield server
    server.close()


def picture(url, text="", at_bot=False):
    """A message with one picture (as NapCat sends it), then text."""
    return ([{"type": "at", "data": {"qq": "10001"}}] if at_bot else []) + \
           [{"type": "image", "data": {"file": "abc.png", "url": url, "sub_type": 0, "file_size": "100"}}] + \
           ([{"type": "text", "data": {"text": text}}] if text else [])


def test_a_picture_is_described_stored_searchable_and_cached(env, llm, pictures):
    pictures.pictures["cat.png"] = (png(), 0)
    pictures.pictures["again.png"] = (png(), 0)  # the same picture at another URL
    r, c = start(env, VISION_MODEL="vl-test")
    try:
        c.event(1240001, message=picture(pictures.url("cat.png"), "看我家猫"))
        assert c.reply_text() == f"echo:[图片：{CAT}]看我家猫"
        [vision] = llm.vision_requests()
        assert vision["json"]["model"] == "vl-test"
        [ask] = vision["json"]["messages"]
        assert ask["content"][0] == {"type": "text", "text": "用中文简要描述这张图片"}
        head, data = ask["content"][1]["image_url"]["url"].split(",", 1)
        assert head == "data:image/png;base64" and base64.b64decode(data) == png()
        assert llm.chat_requests()[-1]["json"]["model"] == r.cfg.LLM_MODEL
        assert r.rows("SELECT text FROM messages WHERE session = 'p:1240001' AND role = 'user'") == \
            [{"text": f"[图片：{CAT}]看我家猫"}]
        found = r.rows("SELECT m.role FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
                       "WHERE messages_fts MATCH ? ORDER BY m.id", " ".join(bot.text_tokens("橘猫")))
        assert found == [{"role": "user"}, {"role": "assistant"}]  # the echo reply repeats it
        c.event(1240002, message=picture(pictures.url("again.png"), " 这是啥", at_bot=True), group_id=GROUP, card="阿强")
        assert c.reply_text().strip() == f"echo:阿强：[图片：{CAT}] 这是啥"
        assert len(llm.vision_requests()) == 1 and pictures.hits == {"cat.png": 1, "again.png": 1}
    finally:
        c.close()
        r.stop()


@pytest.mark.parametrize("name, content, delay", [
    ("page.html", b"<html>not a picture</html>", 0),
    ("big.png", png() + bytes(5 << 20), 0),
    ("slow.png", png(), 10),
    ("missing.png", None, 0),
    ("ftp", None, 0),
])
def test_a_picture_that_fails_stays_a_placeholder_and_the_reply_comes(env, llm, pictures, monkeypatch, name, content, delay):
    monkeypatch.setattr(bot, "VISION_TIMEOUT", 1.0)  # the 10 s, shortened so the test is quick
    if content is not None:
        pictures.pictures[name] = (content, delay)
    url = "ftp://127.0.0.1/cat.png" if name == "ftp" else pictures.url(name)
    r, c = start(env, VISION_MODEL="vl-test")
    try:
        began = time.monotonic()
        c.event(1240003, message=picture(url, "看看"))
        assert c.reply_text() == "echo:[图片]看看"
        assert time.monotonic() - began < 8  # VISION_TIMEOUT 1 s, not the slow picture's 10 s
        assert llm.vision_requests() == []
        assert r.rows("SELECT text FROM messages WHERE role = 'user'") == [{"text": "[图片]看看"}]
    finally:
        c.close()
        r.stop()


def test_a_picture_sent_while_the_bot_answers_joins_the_burst_described(env, llm, pictures):
    pictures.pictures["cat.png"] = (png(), 0)
    r, c = start(env, VISION_MODEL="vl-test")
    try:
        llm.delay = 0.5
        c.event(1240006, "在吗")
        assert wait_for(lambda: llm.chat_requests())  # the first reply is being written
        c.event(1240006, "你看")
        c.event(1240006, message=picture(pictures.url("cat.png"), "我家的"))
        assert c.reply_text() == "echo:在吗"
        assert c.reply_text() == f"echo:你看\n[图片：{CAT}]我家的"
        assert [x["text"] for x in r.rows("SELECT text FROM messages WHERE role = 'user' ORDER BY id")] == \
            ["在吗", "你看", f"[图片：{CAT}]我家的"]
    finally:
        c.close()
        r.stop()


def test_past_the_daily_budget_no_picture_is_described(env, llm, pictures):
    pictures.pictures["cat.png"] = (png(), 0)
    r, c = start(env, VISION_MODEL="vl-test", BOT_DAILY_TOKENS=10)
    try:
        c.ask(1240007, "你好")  # the fake LLM counts 15 tokens a reply
        c.event(1240007, message=picture(pictures.url("cat.png")))
        assert "明天再来" in c.reply_text()
        assert llm.vision_requests() == []
    finally:
        c.close()
        r.stop()


def test_without_a_vision_model_nothing_is_fetched(runner, napcat, llm, pictures):
    pictures.pictures["cat.png"] = (png(), 0)
    napcat.event(1240004, message=picture(pictures.url("cat.png")))
    assert napcat.reply_text() == "echo:[图片]"
    assert pictures.hits == {} and llm.vision_requests() == []


def test_an_unaddressed_group_picture_is_not_fetched(env, llm, pictures):
    pictures.pictures["cat.png"] = (png(), 0)
    r, c = start(env, VISION_MODEL="vl-test")
    try:
        c.event(1240005, message=picture(pictures.url("cat.png")), group_id=GROUP)
        assert c.barrier(1240005, group_id=GROUP, at_bot=True) == []
        assert pictures.hits == {} and llm.vision_requests() == []
    finally:
        c.close()
        r.stop()


# 7. Following up ###############################################################

PLAN = "此前，用户说下周三要去面试，还没准备好自我介绍。"


def follow_up_note(llm):
    """The follow-up note of the last reply's prompt, or None."""
    return system_part(chat_messages(llm), "（距离上次聊天")


def away_and_back(env, llm, monkeypatch, summary, hours_away, **settings):
    """Two turns summarised as `summary` (the third starts the summary), then a message hours_away later
    (the bot's clock moved): its prompt's follow-up note."""
    llm.summary_script = [summary]
    r, c = start(env, SUMMARY_EVERY=2, **settings)
    try:
        c.ask(1250001, "下周三我要去面试")
        c.ask(1250001, "自我介绍还没写")
        c.ask(1250001, "好的")
        assert wait_for(lambda: r.rows("SELECT text FROM summaries")) == [{"text": summary}]
        later = time.time() + hours_away * 3600
        monkeypatch.setattr(bot, "clock", lambda: later)
        c.ask(1250001, "我回来啦")
        return follow_up_note(llm), r, c
    except BaseException:
        c.close()
        r.stop()
        raise


def test_coming_back_after_hours_the_first_reply_may_ask_about_the_plan_once(env, llm, monkeypatch):
    note, r, c = away_and_back(env, llm, monkeypatch, PLAN, 13)
    try:
        assert note == "（距离上次聊天已经过了 13 小时；上次提到：用户说下周三要去面试，还没准备好自我介绍。" \
                       "如果自然，可以顺口问一句进展，只问一次）"
        messages = chat_messages(llm)
        # the note ends the one system message; the user's words stay the last turn
        assert messages[0]["content"].endswith("\n\n" + note) and messages[-1] == {"role": "user", "content": "我回来啦"}
        monkeypatch.setattr(bot, "clock", lambda: time.time() + 40 * 3600)
        c.ask(1250001, "又回来了")
        assert follow_up_note(llm) is None  # away again, the same latest summary: asked about once
        c.ask(1250001, "今天好累")
        assert follow_up_note(llm) is None  # not away
    finally:
        c.close()
        r.stop()


@pytest.mark.parametrize("summary, hours_away, settings", [
    (PLAN, 11, {}),  # not away long enough
    (PLAN, 30, {"FOLLOW_UP_HOURS": 48}),
    (PLAN, 30, {"FOLLOW_UP_HOURS": 0}),  # off
    ("此前，用户聊了面试的经历，说面试已经结束了。", 30, {}),  # nothing open
    ("此前，用户和我聊了今天的天气。", 30, {}),
])
def test_no_follow_up_note_when_not_away_off_or_nothing_open(env, llm, monkeypatch, summary, hours_away, settings):
    note, r, c = away_and_back(env, llm, monkeypatch, summary, hours_away, **settings)
    c.close()
    r.stop()
    assert note is None


def test_the_follow_up_note_counts_days(env, llm, monkeypatch):
    note, r, c = away_and_back(env, llm, monkeypatch, PLAN, 24 * 3 + 1)
    c.close()
    r.stop()
    assert note.startswith("（距离上次聊天已经过了 3 天；")
