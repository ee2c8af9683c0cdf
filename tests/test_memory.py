"""Long-term memory: 记住 / 更新 / 忘记 / 你记得我什么 / 撤销, and the hybrid Chinese search."""

import json

import pytest

from conftest import Runner
from fakes import NapCat, run_bot
import bot


@pytest.fixture(scope="module")
def embedder():
    """Keyword-only, as on a machine without a model: vec() is None."""
    return bot.Embedder("off")


@pytest.fixture(scope="module")
def embedder_vec(model_path):
    """The small real model, for the tests of vector search itself."""
    return bot.Embedder(model_path)


def open_db(path, embedder):
    c = bot.db_connect(path)
    if embedder.model is not None:
        bot.db_vec_prepare(c, embedder.name, embedder.dim)
    return c


@pytest.fixture
def conn(tmp_path, embedder):
    c = open_db(tmp_path / "m.db", embedder)
    yield c
    c.close()


@pytest.fixture
def conn_vec(tmp_path, embedder_vec):
    c = open_db(tmp_path / "v.db", embedder_vec)
    yield c
    c.close()


def vec(embedder, text):
    """text's vector, or None keyword-only."""
    return embedder.encode([text])[0] if embedder.model is not None else None


def ctx(user="1", group="", char="assistant"):
    return bot.Ctx(user_id=user, session=f"g:{group}" if group else f"p:{user}", character_id=char, group_id=group)


def remember(conn, embedder, c, fact, **kw):
    return bot.memory_remember(conn, c, fact, vec(embedder, fact), **kw)


@pytest.mark.parametrize("text,kind,arg", [
    ("记住，我住在北京", "remember", "我住在北京"),
    ("记住我住在北京", "remember", "我住在北京"),
    ("请记住：我对花生过敏", "remember", "我对花生过敏"),
    ("记一下 我的生日是三月五号", "remember", "我的生日是三月五号"),
    ("别忘了，我女儿叫朵朵", "remember", "我女儿叫朵朵"),
    ("remember I like jazz", "remember", "I like jazz"),
    ("/remember 我养了一只猫", "remember", "我养了一只猫"),
    ("更新一下，我现在住在上海了", "update", "我现在住在上海了"),
    ("更正：我的生日是三月六号", "update", "我的生日是三月六号"),
    ("其实我现在在腾讯工作", "update", "我现在在腾讯工作"),
    ("忘记我住在哪", "forget", "我住在哪"),
    ("忘掉第3条", "forget", "第3条"),
    ("删除记忆：花生", "forget", "花生"),
    ("忘记关于我的一切", "forget_all", "关于我的一切"),
    ("你记得我什么", "list", ""),
    ("你记得我什么？", "list", ""),
    ("我的记忆", "list", ""),
    ("/memories", "list", ""),
    ("撤销", "undo", ""),
    ("公开第2条", "public", "2"),
    ("我忘记带钥匙了", None, ""),
    ("你还记得我说过什么吗", None, ""),
    # chat that starts with a command word is chat
    ("忘记带伞了，淋成落汤鸡", None, ""),
    ("删除这个文件要怎么操作", None, ""),
    ("忘记所有烦恼吧", None, ""),
    ("forget it", None, ""),
    ("remember me?", None, ""),
    ("记住了吗", None, ""),
    ("更新了吗？", None, ""),
    ("更新到最新版要多久", None, ""),
    ("其实我现在很难过", None, ""),
])
def test_phrasings(text, kind, arg):
    assert bot.memory_parse(text) == (kind, arg)


@pytest.mark.parametrize("fact,attribute,value", [
    ("我住在北京", "住址", "北京"),
    ("我现在住在上海了", "住址", "上海"),
    ("我的生日是三月五号", "生日", "三月五号"),
    ("我叫王小明", "名字", "王小明"),
    ("我对花生过敏", "过敏", "花生"),
    ("我喜欢爬山", "喜欢", "爬山"),
    ("我讨厌香菜", "讨厌", "香菜"),
    ("我养了一只柯基", "宠物", "一只柯基"),
    ("我住院了", None, None),
    ("我叫了外卖", None, None),
    ("我生日快到了", None, None),
    ("我生日3月5日", "生日", "3月5日"),
    ("我在腾讯工作", "工作", "腾讯"),
    ("今天天气不错", None, None),
])
def test_attributes(fact, attribute, value):
    assert bot.memory_attribute(fact)[:2] == (attribute, value)


def test_options_mark_importance_and_public():
    assert bot.memory_options("这个很重要：我对花生过敏") == ("我对花生过敏", 2, None)
    assert bot.memory_options("（公开）我是猫奴") == ("我是猫奴", 1, "public")


def test_duplicate_refreshes_instead_of_adding(conn, embedder):
    c = ctx()
    assert "记住了：用户住在北京" in remember(conn, embedder, c, "我住在北京")
    again = remember(conn, embedder, c, "我住在北京！")
    assert "已经记着了" in again and "第1条" in again
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 1


def test_update_replaces_keeps_history_and_undo_restores(conn, embedder):
    c = ctx()
    remember(conn, embedder, c, "我住在北京")
    msg = remember(conn, embedder, c, "我现在住在上海了")
    assert msg.startswith("已更新第1条：用户住在北京 → 用户住在上海")
    rows = conn.execute("SELECT canonical FROM memories").fetchall()
    assert [r[0] for r in rows] == ["用户住在上海"]
    old = json.loads(conn.execute("SELECT old_row FROM memory_history WHERE action = 'update'").fetchone()[0])
    assert old["canonical"] == "用户住在北京"
    assert "改回了：用户住在北京" in bot.memory_undo(conn, c, lambda t: vec(embedder, t))
    assert [r[0] for r in conn.execute("SELECT canonical FROM memories")] == ["用户住在北京"]


def test_vector_follows_the_text_through_update_and_undo(conn_vec, embedder_vec):
    c = ctx()
    remember(conn_vec, embedder_vec, c, "我住在北京")
    remember(conn_vec, embedder_vec, c, "我现在住在上海了")
    bot.memory_undo(conn_vec, c, lambda t: vec(embedder_vec, t))
    (mid, sim), = bot.search_vector(conn_vec, "memories_vec", "1", vec(embedder_vec, "我住在北京"), limit=1)
    assert mid == conn_vec.execute("SELECT id FROM memories").fetchone()[0] and sim > 0.999


def test_multi_valued_attributes(conn, embedder):
    c = ctx()
    remember(conn, embedder, c, "我喜欢猫")
    remember(conn, embedder, c, "我喜欢爬山")
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 2
    msg = remember(conn, embedder, c, "我讨厌猫")  # contradicts 喜欢猫 on the same object
    assert "用户喜欢猫 → 用户讨厌猫" in msg
    assert sorted(r[0] for r in conn.execute("SELECT canonical FROM memories")) == ["用户喜欢爬山", "用户讨厌猫"]
    msg = remember(conn, embedder, c, "我现在喜欢游泳", update=True)  # said as an update: replaces the latest 喜欢
    assert "用户喜欢爬山 → 用户喜欢游泳" in msg


def test_update_without_attribute_finds_the_nearest(conn, embedder):
    c = ctx()
    remember(conn, embedder, c, "我每周三晚上打羽毛球")
    msg = remember(conn, embedder, c, "我每周四晚上打羽毛球", update=True)
    assert "→ 用户每周四晚上打羽毛球" in msg
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 1


def test_forget_by_text_number_and_ambiguity(conn, embedder):
    c = ctx()
    for f in ("我住在北京", "我对花生过敏", "我喜欢北京烤鸭", "我养了一只柯基"):
        remember(conn, embedder, c, f)
    v = lambda t: vec(embedder, t)
    assert bot.memory_forget(conn, c, "花生过敏", v("花生过敏")).startswith("已忘记：用户对花生过敏")
    ask = bot.memory_forget(conn, c, "北京", v("北京"))
    assert "哪一条" in ask and "用户住在北京" in ask and "用户喜欢北京烤鸭" in ask
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 3
    assert bot.memory_forget(conn, c, "第3条", None).startswith("已忘记：用户养了一只柯基")
    assert "没有第9条" in bot.memory_forget(conn, c, "第9条", None)
    assert "没有找到" in bot.memory_forget(conn, c, "量子力学", v("量子力学"))
    assert "恢复了：用户养了一只柯基" in bot.memory_undo(conn, c, v)


@pytest.mark.parametrize("query,expected", [
    ("这家店的汤里有香菜吗", "用户不吃香菜"),
    ("北京", "用户住在北京"),
    ("花生", "用户对花生过敏"),
    ("python 的 requests 怎么设置超时", "用户每天用Python写爬虫"),
    ('AND OR NOT "香菜 NEAR( * ^ -', "用户不吃香菜"),
    ("'); DROP TABLE memories;-- 香菜", "用户不吃香菜"),
])
def test_keyword_search_handles_two_char_words_mixed_and_operators(conn, embedder, query, expected):
    c = ctx()
    for f in ("我住在北京", "我不吃香菜", "我对花生过敏", "我每天用Python写爬虫", "我妈妈住在上海", "我喜欢菜市场的热闹"):
        remember(conn, embedder, c, f)
    hits = bot.memory_search(conn, c, query, None, limit=5, min_similarity=0.55)  # keyword only
    assert hits and hits[0]["canonical"] == expected


def test_search_is_isolated_by_user_and_by_chat(conn, embedder):
    a, b = ctx("1"), ctx("2")
    remember(conn, embedder, a, "我住在北京")
    remember(conn, embedder, b, "我住在广州")
    q = vec(embedder, "住在哪里")
    assert [h["canonical"] for h in bot.memory_search(conn, b, "我住在哪里", q, limit=5, min_similarity=0.3)] == ["用户住在广州"]
    assert "广州" not in bot.memory_format_list(bot.memory_list(conn, a))
    assert "没有找到" in bot.memory_forget(conn, a, "广州", vec(embedder, "广州"))
    # told in private: not seen in a group until made public
    in_group = ctx("1", group="500")
    assert bot.memory_list(conn, in_group) == []
    bot.memory_set_scope(conn, a, 1, True)
    assert [r["canonical"] for r in bot.memory_list(conn, in_group)] == ["用户住在北京"]
    # told in group 500: seen there and in private, not in group 600
    remember(conn, embedder, in_group, "我是群主")
    assert len(bot.memory_list(conn, ctx("1", group="600"))) == 1
    assert len(bot.memory_list(conn, a)) == 2


def test_commands_through_qq(runner, napcat, llm):
    ask = lambda t: napcat.ask(801, t)
    assert ask("记住，我住在北京") == "好的，我记住了：用户住在北京。"
    assert ask("记住，这个很重要：我对青霉素过敏") == "好的，我记住了：用户对青霉素过敏，标为重要。"
    assert "已经记着了" in ask("请记住 我住在北京")
    assert ask("更新一下，我现在住在上海了").startswith("已更新第1条：用户住在北京 → 用户住在上海")
    listing = ask("你记得我什么")
    assert "1. 用户住在上海" in listing and "2. 用户对青霉素过敏（重要）" in listing
    assert ask("撤销") == "已撤销，改回了：用户住在北京"
    assert ask("忘记第2条").startswith("已忘记：用户对青霉素过敏")
    assert llm.requests == []  # writes need no LLM call
    # in a group, after an @
    napcat.event(801, " 记住，我周末去爬山", group_id=321, at_bot=True)
    assert "记住了：用户周末去爬山" in napcat.reply_text()
    # the fact reaches the prompt when it matters
    ask("北京今天冷不冷")
    context = [m["content"] for m in llm.requests[-1]["json"]["messages"] if m["role"] == "system"]
    assert any("用户住在北京" in c for c in context)


def test_forget_everything_needs_confirmation(runner, napcat):
    ask = lambda t: napcat.ask(802, t)
    ask("记住，我住在北京")
    ask("记住，我喜欢猫")
    assert "确认删除" in ask("忘记关于我的一切")
    assert "2条" in ask("确认删除")
    assert "还没有记住" in ask("你记得我什么")
    assert "没有待确认的删除" in ask("确认删除")


def test_export_import_round_trip(env, tmp_path):
    src = tmp_path / "in.jsonl"
    lines = [{"user_id": "1", "text": "我住在北京"}, {"user_id": "1", "text": "我对花生过敏", "importance": 2},
             {"user_id": "2", "text": "我喜欢爬山", "scope": "public", "created_at": 1700000000.0}]
    src.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    p = run_bot("memory", "import", src, env=env)
    assert p.returncode == 0 and "imported 3 memories" in p.stdout, p.stderr
    p = run_bot("memory", "export", env=env)
    out = [json.loads(x) for x in p.stdout.splitlines()]
    assert [(o["user_id"], o["text"], o["importance"], o["scope"]) for o in out] == [
        ("1", "我住在北京", 1, "private"), ("1", "我对花生过敏", 2, "private"), ("2", "我喜欢爬山", 1, "public")]
    assert out[2]["created_at"] == 1700000000.0 and out[0]["canonical"] == "用户住在北京"
    p = run_bot("memory", "export", "--user", "2", env=env)
    assert [json.loads(x)["text"] for x in p.stdout.splitlines()] == ["我喜欢爬山"]


def test_import_with_the_model_stores_vectors(env_vec, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"user_id": "1", "text": "我住在北京"}\n{"user_id": "2", "text": "我喜欢爬山"}\n', encoding="utf-8")
    assert run_bot("memory", "import", src, env=env_vec).returncode == 0
    conn = bot.db_connect(env_vec["BOT_DB"])
    assert conn.execute("SELECT count(*) FROM memories_vec").fetchone()[0] == 2
    conn.close()


def test_keyword_only_mode_then_backfill(env_vec, llm):
    env = env_vec
    r = Runner(dict(env, EMBED_MODEL="off"))
    try:
        c = NapCat(r.cfg.ONEBOT_PORT)
        assert "记住了" in c.ask(804, "记住，我不吃香菜")
        assert "记住了" in c.ask(804, "记住，我在学日语")
        c.ask(804, "这家店的汤里有香菜吗")
        assert any("用户不吃香菜" in m["content"] for m in llm.requests[-1]["json"]["messages"])
        c.close()
    finally:
        r.stop()
    r = Runner(env)  # now with the model: the missing vectors are filled in at start
    try:
        n = r.db(lambda conn: conn.execute("SELECT count(*) FROM memories_vec").fetchone()[0])
        assert n == 2
    finally:
        r.stop()


def test_offers_to_remember_what_the_user_keeps_saying(runner, napcat):
    assert napcat.ask(805, "我对芒果过敏，好烦") == "echo:我对芒果过敏，好烦"
    assert napcat.ask(805, "我对芒果过敏啊") == "echo:我对芒果过敏啊"
    third = napcat.ask(805, "我对芒果过敏，这个蛋糕能吃吗")
    assert third.startswith("echo:") and "要我帮你记住吗？说“记住，我对芒果过敏”就行" in third
    assert runner.db(lambda c: c.execute("SELECT count(*) FROM memories WHERE user_id = '805'").fetchone()[0]) == 0
    napcat.ask(805, "记住，我对芒果过敏")
    assert "要我帮你记住" not in napcat.ask(805, "我对芒果过敏")  # stored now: no more offers


def test_undo_never_touches_another_users_row(conn, embedder):
    a, b = ctx("1"), ctx("2")
    remember(conn, embedder, a, "我对青霉素过敏")
    bot.memory_forget(conn, a, "第1条", None)
    remember(conn, embedder, b, "我养了一只猫叫年糕")  # ids are never reused, so this is not id 1
    assert "恢复了：用户对青霉素过敏" in bot.memory_undo(conn, a, lambda t: vec(embedder, t))
    assert [r["canonical"] for r in bot.memory_list(conn, b)] == ["用户养了一只猫叫年糕"]
    assert "删掉了" in bot.memory_undo(conn, b, lambda t: vec(embedder, t))
    assert [r["canonical"] for r in bot.memory_list(conn, a)] == ["用户对青霉素过敏"]


def test_undo_in_a_group_leaves_private_changes_alone(conn, embedder):
    private, group = ctx("1"), ctx("1", group="500")
    remember(conn, embedder, private, "我对青霉素过敏")
    msg = bot.memory_undo(conn, group, lambda t: vec(embedder, t))
    assert "青霉素" not in msg and "别处" in msg
    assert len(bot.memory_list(conn, private)) == 1


def test_update_keeps_scope_and_public_mark_applies_to_duplicates(conn, embedder):
    c = ctx("1")
    remember(conn, embedder, c, "我住在北京", scope="public")
    remember(conn, embedder, c, "我现在住在上海了")
    assert conn.execute("SELECT scope FROM memories").fetchone()[0] == "public"
    remember(conn, embedder, c, "我喜欢爬山")
    remember(conn, embedder, c, "我喜欢爬山", scope="public")
    assert conn.execute("SELECT scope FROM memories WHERE canonical = '用户喜欢爬山'").fetchone()[0] == "public"


def test_forgotten_commands_do_not_come_back_through_old_turns(runner, napcat, llm):
    napcat.ask(806, "记住，我对青霉素过敏")
    for i in range(8):
        napcat.ask(806, f"随便聊聊第{i}句")
    napcat.ask(806, "忘记关于我的一切")
    napcat.ask(806, "确认删除")
    napcat.ask(806, "医生要给我开青霉素，可以吗")
    assert "青霉素过敏" not in json.dumps(llm.chat_requests()[-1]["json"]["messages"], ensure_ascii=False)


def test_import_reports_bad_types_by_line(tmp_path, embedder):
    conn = bot.db_connect(tmp_path / "i.db")
    lines = ['{"user_id": "1", "text": 123}', '{"user_id": "1", "text": "好", "importance": "high"}',
             '{"user_id": "1", "text": "好", "type": "experience"}', '{"user_id": "1", "text": "好"}']
    n, errors = bot.memory_import_rows(conn, embedder, lines)
    assert n == 0 and [e.split(":")[0] for e in errors] == ["line 1", "line 2", "line 3"]
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
