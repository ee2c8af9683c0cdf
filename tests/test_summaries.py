"""Conversation summaries: when they run, what they hold, and how prompts use them."""

import time

import pytest

from conftest import Runner
from fakes import NapCat, wait_for
import bot

TOPIC_A = ["我最近在学做红烧肉", "红烧肉要先焯水吗", "冰糖炒糖色容易糊怎么办", "红烧肉炖多久比较软烂",
           "我用的是五花肉", "酱油放老抽还是生抽", "要不要加八角桂皮", "收汁的时候要大火吗",
           "我家锅是铸铁锅", "红烧肉配什么菜好"]


def summaries(runner, session):
    return runner.rows("SELECT * FROM summaries WHERE session = ? ORDER BY id", session)


@pytest.fixture
def env3(env):
    return dict(env, SUMMARY_EVERY="3")


@pytest.fixture
def runner3(env3):
    r = Runner(env3)
    yield r
    r.stop()


@pytest.fixture
def napcat3(runner3):
    c = NapCat(runner3.cfg.ONEBOT_PORT)
    yield c
    c.close()


def test_summary_every_n_turns(runner3, napcat3, llm):
    for t in TOPIC_A[:4]:
        napcat3.ask(10, t)
    rows = wait_for(lambda: summaries(runner3, "p:10"))
    assert len(rows) == 1 and rows[0]["method"] == "llm" and rows[0]["text"].startswith("此前")
    covered = runner3.db(lambda conn: [x[0] for x in conn.execute(
        "SELECT text FROM messages WHERE id BETWEEN ? AND ? ORDER BY id", (rows[0]["first_msg"], rows[0]["last_msg"]))])
    assert covered == [TOPIC_A[0], "echo:" + TOPIC_A[0], TOPIC_A[1], "echo:" + TOPIC_A[1], TOPIC_A[2], "echo:" + TOPIC_A[2]]
    prompt = [x for x in llm.requests if "笔记" in x["json"]["messages"][0]["content"]][0]["json"]["messages"]
    assert prompt[0]["role"] == "system" and "以小满的视角" in prompt[0]["content"]
    assert "红烧肉要先焯水吗" in prompt[1]["content"] and prompt[1]["role"] == "user"
    # the next reply's prompt carries the summary as the latest one (one line, quoted as data)
    napcat3.ask(10, "好的谢谢")
    ctx = [m["content"] for m in llm.chat_requests()[-1]["json"]["messages"] if m["role"] == "system"]
    assert any("【此前】" in x and bot.text_neutralise(rows[0]["text"]) in x for x in ctx)


def test_topic_shift_closes_the_window_early(runner, napcat):
    for t in TOPIC_A[:6]:
        napcat.ask(11, t)
    assert summaries(runner, "p:11") == []  # SUMMARY_EVERY is 10
    napcat.ask(11, "明天去机场的航班延误险怎么买")
    rows = wait_for(lambda: summaries(runner, "p:11"))
    assert len(rows) == 1
    last_user = runner.db(lambda c: c.execute("SELECT max(id) FROM messages WHERE session = 'p:11' AND text = ?",
                                              ("明天去机场的航班延误险怎么买",)).fetchone()[0])
    assert rows[0]["last_msg"] < last_user  # the window ends before the new topic


def test_small_talk_is_not_summarised(runner3, napcat3, llm):
    for t in ["哈哈", "好的", "嗯嗯", "在吗", "哈哈哈", "晚安"]:
        napcat3.ask(12, t)
    pointer = wait_for(lambda: runner3.db(lambda conn: conn.execute(
        "SELECT summarised_upto FROM sessions WHERE session = 'p:12'").fetchone()[0]))
    assert pointer > 0 and summaries(runner3, "p:12") == []
    assert not [x for x in llm.requests if "笔记" in x["json"]["messages"][0]["content"]]


def test_slow_summary_does_not_delay_the_reply(runner3, napcat3, llm):
    llm.summary_delay = 3.0
    for t in TOPIC_A[:4]:
        napcat3.ask(13, t)  # the 4th turn starts a summary that takes 3 s
    t0 = time.time()
    assert napcat3.ask(13, "红烧肉可以放冰箱几天") == "echo:红烧肉可以放冰箱几天"
    assert time.time() - t0 < 2.0
    assert summaries(runner3, "p:13") == []  # still being written
    assert wait_for(lambda: summaries(runner3, "p:13"), timeout=30)


def test_llm_failure_falls_back_to_extractive(runner3, napcat3, llm):
    llm.summary_script = [{"status": 500, "headers": {"Retry-After": "0"}}] * 3  # each try at once, no backoff
    for t in TOPIC_A[:4]:
        napcat3.ask(14, t)
    rows = wait_for(lambda: summaries(runner3, "p:14"))
    assert rows[0]["method"] == "extractive" and rows[0]["text"].startswith("此前，")
    assert "红烧肉" in rows[0]["text"]


def test_restart_resumes_at_the_right_turn(env3, llm):
    r = Runner(env3)
    c = NapCat(r.cfg.ONEBOT_PORT)
    for t in TOPIC_A[:4]:
        c.ask(15, t)
    first = wait_for(lambda: summaries(r, "p:15"))[0]
    c.close()
    r.stop()
    r = Runner(env3)
    try:
        c = NapCat(r.cfg.ONEBOT_PORT)
        for t in TOPIC_A[4:7]:
            c.ask(15, t)
        rows = wait_for(lambda: len(summaries(r, "p:15")) == 2 and summaries(r, "p:15"))
        assert rows[1]["first_msg"] == first["last_msg"] + 1  # nothing repeated, nothing skipped
        c.close()
    finally:
        r.stop()


def test_rollup_keeps_originals_searchable(env, llm):
    r = Runner(dict(env, SUMMARY_EVERY="2", SUMMARY_ROLLUP="4"))
    try:
        c = NapCat(r.cfg.ONEBOT_PORT)
        for t in TOPIC_A:
            c.ask(16, t)
        rows = wait_for(lambda: [x for x in summaries(r, "p:16") if x["level"] == 1])
        assert rows
        rolled = [x for x in summaries(r, "p:16") if x["rolled_into"] == rows[0]["id"]]
        assert len(rolled) >= 2 and rows[0]["first_msg"] == rolled[0]["first_msg"]
        n = r.db(lambda conn: conn.execute("SELECT count(*) FROM summaries_fts WHERE rowid = ?", (rolled[0]["id"],)).fetchone()[0])
        assert n == 1
        c.close()
    finally:
        r.stop()


def test_extractive_summary_keeps_content_sentences():
    turns = [("小王", "哈哈好的。"), ("小王", "我下周三要去杭州参加表哥的婚礼。"), ("小满", "好的，祝你玩得开心！"),
             ("小王", "婚礼在西湖边的酒店。"), ("小王", "嗯嗯"), ("小满", "记得带伴手礼。"), ("小王", "杭州的婚礼要随多少礼金？")]
    text, kept = bot.summary_extractive(turns, max_sentences=3)
    assert text.startswith("此前，") and "杭州" in text and "嗯嗯" not in text and "哈哈好的" not in text
    assert 1 in kept and len(kept) <= 3


def test_prompt_stays_flat_as_the_chat_grows(tmp_path):
    conn = bot.db_connect(tmp_path / "p.db")
    card = bot.character_parse(open(bot.HERE / "characters.json", encoding="utf-8").read())["cards"]["assistant"]
    cfg = bot.config_load(environ={}, dotenv="/nonexistent")
    sizes = {}
    n = 0
    for turn in range(1, 1001):
        for role, text in (("user", f"第{turn}轮：" + TOPIC_A[turn % 10] * 3), ("assistant", "好的，" + TOPIC_A[(turn + 3) % 10] * 4)):
            n = conn.execute("INSERT INTO messages (session, user_id, speaker, role, character_id, text, created_at) "
                             "VALUES ('p:1', '1', 'u', ?, 'assistant', ?, 0)", (role, text)).lastrowid
        if turn % 10 == 0:
            bot.summary_store(conn, "p:1", "assistant", [{"id": n - 19}, {"id": n}], "此前，" + TOPIC_A[turn % 7] * 5,
                              "llm", None)
        if turn in (10, 100, 1000):
            ctx = bot.Ctx(user_id="1", session="p:1", character_id="assistant", message_id=n + 1)
            parts = bot.prompt_context(conn, ctx, card, "红烧肉怎么做", None, cfg)
            _, used = bot.prompt_assemble(card, ctx, "红烧肉怎么做", parts, cfg.PROMPT_BUDGET)
            sizes[turn] = used
    assert all(v <= cfg.PROMPT_BUDGET for v in sizes.values())
    assert sizes[1000] <= sizes[100] * 1.2


def test_experience_from_turn_2_comes_back_at_turn_60(runner, napcat, llm):
    napcat.ask(17, "今天好累啊")
    napcat.ask(17, "我下周三要去杭州参加表哥的婚礼")
    filler = ["推荐一部科幻电影", "怎么学好英语口语", "猫为什么喜欢纸箱", "周末适合去哪里爬山", "咖啡喝多了会失眠吗",
              "怎么挑选西瓜", "跑步膝盖疼怎么办", "手机电池怎么保养", "如何做番茄炒蛋", "推荐几本历史书",
              "宇宙有多大", "怎么养多肉植物"]
    for i in range(57):
        napcat.ask(17, filler[i % len(filler)] + f"（{i}）")
    wait_for(lambda: not runner.app.summaries.tasks.get("p:17") or runner.app.summaries.tasks["p:17"].done())
    napcat.ask(17, "我之前说下周三要去参加谁的婚礼来着？")
    prompt = "\n".join(m["content"] for m in llm.chat_requests()[-1]["json"]["messages"])
    assert "杭州" in prompt and "表哥" in prompt
    recent = [m["content"] for m in llm.chat_requests()[-1]["json"]["messages"] if m["role"] != "system"]
    assert not any("杭州" in x for x in recent)  # it came from memory, not from the raw window


@pytest.mark.parametrize("word, stem", [("painting", "paint"), ("researched", "research"), ("sunrises", "sunris"),
                                        ("activities", "activit"), ("go", "go"), ("北京", None), ("2023", None)])
def test_english_words_are_searched_by_their_stem(word, stem):
    assert bot.text_stem(word) == stem


def test_recall_finds_the_past_form_of_an_irregular_verb_and_not_what_its_prefix_starts(tmp_path):
    conn = bot.db_connect(tmp_path / "p.db")
    talk = [("Ben", "Last summer I went to Lisbon with my sister."), ("Ben", "The concert was wonderful."),
            ("Ben", "I bought a guitar there.")] + [("Anna", f"Filler line number {i}.") for i in range(20)]
    for s, t in talk:
        conn.execute("INSERT INTO messages (session, user_id, speaker, role, character_id, text, created_at) "
                     "VALUES ('p:1', '1', ?, 'user', 'assistant', ?, 0)", (s, t))
    got = " ".join(t for _, _, t, _ in bot.summary_recall(conn, "p:1", "assistant", "Where did they go?",
                                                           None, limit=1, min_similarity=0.5))
    assert "Lisbon" in got
    # win brings won, exactly: not the wonderful concert
    assert not bot.summary_recall(conn, "p:1", "assistant", "Did they win?", None, limit=1, min_similarity=0.5)


def test_recall_shows_nearby_hits_as_one_excerpt_and_a_question_with_its_answer(tmp_path):
    conn = bot.db_connect(tmp_path / "p.db")
    talk = [("Anna", "What have you been researching lately?"), ("Ben", "Adoption agencies, mostly."),
            ("Anna", "Nice weather today."), ("Ben", "Yes, sunny."), ("Anna", "I researched schools too."),
            ("Ben", "Cool.")] + [("Anna", f"Filler line number {i}.") for i in range(20)] + \
           [("Ben", "My research on agencies is done.")]
    ids = [conn.execute("INSERT INTO messages (session, user_id, speaker, role, character_id, text, created_at) "
                        "VALUES ('p:1', '1', ?, 'user', 'assistant', ?, 0)", (s, t)).lastrowid for s, t in talk]
    got = bot.summary_recall(conn, "p:1", "assistant", "What was researched?", None, limit=5, min_similarity=0.5)
    shown = [i for _, _, _, m in got for i in m]
    assert len(got) == 2 and len(shown) == len(set(shown))
    first = next(g for g in got if ids[0] in g[3])
    # the question brings its answer; the hit two turns on joins the same excerpt, and so may the turns right
    # beside a hit (room is left); the small talk beside no hit does not come
    assert {ids[0], ids[1], ids[4]} <= set(first[3]) and "…" in first[2] and "Nice weather" not in first[2]
    assert any(ids[-1] in g[3] for g in got)
    assert bot.summary_recall(conn, "p:1", "assistant", "what did he do?", None, limit=5, min_similarity=0.5) == []


def test_recall_keeps_within_its_token_budget_and_shows_the_day(tmp_path, monkeypatch):
    conn = bot.db_connect(tmp_path / "p.db")
    day = time.mktime((2023, 7, 31, 13, 0, 0, 0, 0, -1))
    for i in range(60):
        conn.execute("INSERT INTO messages (session, user_id, speaker, role, character_id, text, created_at) "
                     "VALUES ('p:1', '1', 'Anna', 'user', 'assistant', ?, ?)",
                     (f"Pottery class number {i} was fun, " + "we shaped bowls and cups " * 3, day + i))
    monkeypatch.setattr(bot, "RECALL_TOKENS", 60)
    got = bot.summary_recall(conn, "p:1", "assistant", "pottery", None, limit=5, min_similarity=0.5)
    assert got and sum(bot.text_count_tokens(t) for _, _, t, _ in got) <= 5 * 60
    assert all(t.startswith("[2023-07-31]\nAnna：") for _, _, t, _ in got)


@pytest.mark.parametrize("text, days", [  # what a user may type, and the days it names (now: 2023-08-20, a Sunday)
    ("What did Maria do on 31 July, 2023?", ("2023-07-31", "2023-08-01")),
    ("What painting did Melanie show on October 13, 2023?", ("2023-10-13", "2023-10-14")),
    ("我们2023年5月3日聊了什么", ("2023-05-03", "2023-05-04")),
    ("5月3号那天我说了啥", ("2023-05-03", "2023-05-04")),
    ("12月3号说的那家店", ("2022-12-03", "2022-12-04")),  # no year: the latest 3 December up to now
    ("What did John do in May 2023?", ("2023-05-01", "2023-06-01")),
    ("2023年5月我去了哪", ("2023-05-01", "2023-06-01")),
    ("When did Melanie go camping in June?", ("2023-06-01", "2023-07-01")),
    ("我3月份说过什么", ("2023-03-01", "2023-04-01")),
    ("12月份", ("2022-12-01", "2023-01-01")),
    ("昨天说的那家店叫什么", ("2023-08-19", "2023-08-20")),
    ("前天我们聊了啥", ("2023-08-18", "2023-08-19")),
    ("上周我们聊了什么", ("2023-08-07", "2023-08-14")),
    ("what did I say last week", ("2023-08-07", "2023-08-14")),
    ("上个月说的电影", ("2023-07-01", "2023-08-01")),
    ("去年我养的猫叫什么", ("2022-01-01", "2023-01-01")),
    ("What happened in 2022?", ("2022-01-01", "2023-01-01")),
    ("今天天气不错", None), ("I have 2 cats", None), ("May I ask you something?", None),
    ("on Feb 30, 2023", None), ("15月", None)])
def test_dates_a_message_names(text, days):
    now = time.mktime((2023, 8, 20, 12, 0, 0, 0, 0, -1))
    got = [tuple(time.strftime("%Y-%m-%d", time.localtime(t)) for t in span) for span in bot.text_dates(text, now)]
    assert got == ([days] if days else [])


def test_recall_finds_what_was_said_on_a_day_the_question_names(tmp_path, monkeypatch):
    conn = bot.db_connect(tmp_path / "p.db")
    talk = []
    for d in range(1, 29):  # every day Anna speaks of her shelter; on the 14th she did something else there
        day = time.mktime((2023, 2, d, 20, 0, 0, 0, 0, -1))
        talk += [("Anna", f"Another ordinary day at the shelter, number {d}.", day),
                 ("Ben", "Sounds like the shelter keeps you busy.", day + 60)]
        if d == 14:
            talk.append(("Anna", "At the shelter I sat with a little girl who was alone.", day + 120))
    for s, t, when in talk:
        conn.execute("INSERT INTO messages (session, user_id, speaker, role, character_id, text, created_at) "
                     "VALUES ('p:1', '1', ?, 'user', 'assistant', ?, ?)", (s, t, when))
    got = bot.summary_recall(conn, "p:1", "assistant", "What did Anna do at the shelter on 14 February, 2023?", None,
                             limit=2, min_similarity=0.5)
    assert any("little girl" in t and "[2023-02-14]" in t for _, _, t, _ in got)
    plain = bot.summary_recall(conn, "p:1", "assistant", "What did Anna do at the shelter?", None,
                               limit=2, min_similarity=0.5)
    assert not any("little girl" in t for _, _, t, _ in plain)  # the date, not the words, found it
    monkeypatch.setattr(bot, "RECALL_PERIOD_IDS", 2)  # a period of more messages than this is not searched alone
    wide = bot.summary_recall(conn, "p:1", "assistant", "What did Anna do at the shelter on 14 February, 2023?", None,
                              limit=2, min_similarity=0.5)
    assert not any("little girl" in t for _, _, t, _ in wide)
