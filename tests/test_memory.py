"""Long-term memory: 记住 / 更正 / 忘记 / 你记得我什么 / 撤销, the fact parser, and the hybrid Chinese
search. Most tests run keyword-only (as on a Pi without the model); the vector ones use the model."""

import inspect
import json
import re

import pytest

from conftest import Runner
from fakes import ROOT, NapCat, run_bot, system_part, v1_database, wait_for
import bot


@pytest.fixture(scope="module")
def embedder_vec(model_path):
    """The small real model, for the tests of vector search itself."""
    return bot.Embedder(model_path)


@pytest.fixture
def conn_vec(tmp_path, embedder_vec):
    c = bot.db_connect(tmp_path / "v.db")
    bot.db_vec_prepare(c, embedder_vec.name, embedder_vec.dim)
    yield c
    c.close()


def ctx(user="1", group="", char="assistant"):
    return bot.Ctx(user_id=user, session=f"g:{group}" if group else f"p:{user}", character_id=char, group_id=group)


def remember(conn, embedder, c, fact, **kw):
    return bot.memory_remember(conn, c, fact, lambda t: embedder.encode([t])[0], **kw)[0]


def nothing(text):
    return None


@pytest.fixture
def kconn(tmp_path):
    """A database without vectors: the keyword-only path (what a Pi without the model runs)."""
    c = bot.db_connect(tmp_path / "k.db")
    yield c
    c.close()


def say(conn, c, fact, **kw):
    """memory_remember's reply (keyword only)."""
    return bot.memory_remember(conn, c, fact, nothing, **kw)[0]


def texts(conn, user="1"):
    return [r[0] for r in conn.execute("SELECT text FROM memories WHERE user_id = ? ORDER BY id", (user,))]


@pytest.mark.parametrize("text,kind,args", [
    ("记住，我住在北京", "remember", {"text": "我住在北京"}),
    ("记住我住在北京", "remember", {"text": "我住在北京"}),
    ("请记住：我对花生过敏", "remember", {"text": "我对花生过敏"}),
    ("记一下 我的生日是三月五号", "remember", {"text": "我的生日是三月五号"}),
    ("帮我记一下，我女儿叫朵朵", "remember", {"text": "我女儿叫朵朵"}),
    ("记住哦～我不吃香菜", "remember", {"text": "我不吃香菜"}),
    ("小满，记住我喜欢周杰伦", "remember", {"text": "我喜欢周杰伦"}),
    ("remember I like jazz", "remember", {"text": "I like jazz"}),
    ("/remember 我养了一只猫", "remember", {"text": "我养了一只猫"}),
    ("记住明天下午三点开会", "ask", {"text": "明天下午三点开会"}),
    ("更新一下，我现在住在上海了", "update", {"text": "我现在住在上海了"}),
    ("更正：我的生日是三月六号", "update", {"text": "我的生日是三月六号"}),
    ("其实我现在在腾讯工作", "update_actually", {"text": "我现在在腾讯工作"}),  # an update when it is about a memory
    ("忘记我住在哪", "forget", {"what": "我住在哪"}),
    ("忘掉第3条", "forget_numbers", {"numbers": [3]}),
    ("删掉第一条", "forget_numbers", {"numbers": [1]}),
    ("删掉第1条和第3条", "forget_numbers", {"numbers": [1, 3]}),
    ("删除记忆：花生", "forget", {"what": "花生"}),
    ("忘记我刚才说的", "forget_last", {}),
    ("忘记关于我的一切", "forget_all", {}),
    ("确认删除。", "confirm_wipe", {}),
    ("你记得我什么", "list", {}),
    ("你都记得我些啥", "list", {}),
    ("我的记忆", "list", {}),
    ("/memories", "list", {}),
    ("撤销一下", "undo", {}),
    ("公开第2条", "scope", {"n": 2, "public": True}),
    # chat that starts with a command word is chat
    ("我忘记带钥匙了", None, {}),
    ("你还记得我说过什么吗", None, {}),
    ("忘记带伞了，淋成落汤鸡", None, {}),
    ("删除这个文件要怎么操作", None, {}),
    ("忘记所有烦恼吧", None, {}),
    ("forget it", None, {}),
    ("remember me?", None, {}),
    ("记住了吗", None, {}),
    ("更新了吗？", None, {}),
    ("更新到最新版要多久", None, {}),
    ("更新一下系统好麻烦", None, {}),
    ("纠正一下你的发音", None, {}),
    ("其实我现在很难过", None, {}),
    ("其实我现在不喜欢他了", None, {}),
    ("别忘了吃饭哦", None, {}),
    ("记住这个教训吧哈哈", None, {}),
])
def test_phrasings(text, kind, args):
    assert bot.memory_parse(text, ["小满"]) == (kind, args)


@pytest.mark.parametrize("word", bot.REMEMBER_WORDS)
@pytest.mark.parametrize("particle", [""] + list(bot.PARTICLES))
def test_every_remember_word_takes_every_particle(word, particle):
    """记住呗 / 记住哟 work like 记住呀: the words and particles are one list each, used by every rule."""
    said = f"{word}{particle}，我住在北京"
    assert bot.memory_parse(said, ["小满"]) == ("remember", {"text": "我住在北京"})
    assert bot.memory_parse("小满" + said, ["小满"]) == ("remember", {"text": "我住在北京"})


@pytest.mark.parametrize("word", bot.REMEMBER_WEAK_WORDS)
@pytest.mark.parametrize("particle", [""] + list(bot.PARTICLES))
def test_every_weak_remember_word_takes_every_particle(word, particle):
    """记得噢 works like 记得哦 (a weak word still needs a fact about someone)."""
    assert bot.memory_parse(f"{word}{particle}，我妈妈住在北京", ["小满"]) == ("remember", {"text": "我妈妈住在北京"})


@pytest.mark.parametrize("text,kind,args", [
    ("记住呗，我住在北京", "remember", {"text": "我住在北京"}),
    ("记住哟 我对花生过敏", "remember", {"text": "我对花生过敏"}),
    ("记得噢，我妈妈的生日是五月三号", "remember", {"text": "我妈妈的生日是五月三号"}),
    ("记住哦妈妈生日是五月三号", "remember", {"text": "妈妈生日是五月三号"}),
    ("记住哈尔滨是我老家", "ask", {"text": "哈尔滨是我老家"}),  # 哈 is the city"s, not a particle
    ("小满记下来我喜欢猫", "remember", {"text": "我喜欢猫"}),
    ("嗯嗯 纠正一下，我住在上海", "update", {"text": "我住在上海"}),
])
def test_particles_and_command_words_from_the_shared_lists(text, kind, args):
    assert bot.memory_parse(text, ["小满"]) == (kind, args)


#: One message for every kind memory_parse gives: each must have what acts on it.
KIND_EXAMPLES = {
    "list": "你记得我什么", "group_list": "本群记得什么", "group_forget": "忘记本群第1条",
    "group_forget_text": "忘记本群开黑的事", "undo": "撤销", "confirm_wipe": "确认删除", "forget_all": "忘记关于我的一切",
    "forget_last": "忘记我刚才说的", "forget_numbers": "删掉第1条和第3条", "scope": "公开第2条", "forget": "忘记我的生日",
    "update": "更正：我住在上海", "update_last": "更正：是南京", "replace_value": "更正：不是芹菜，是韭菜",
    "group_update": "更正：本群周六开黑", "group_remember": "记住，本群周五开黑", "remember": "记住，我住在北京",
    "ask": "记住明天三点开会", "forget_maybe": "忘记榴莲", "update_named": "更正一下，阿强喜欢打篮球",
    "update_mine": "更正 QQ号是12345", "profile": "你觉得我是个什么样的人", "update_attr": "更正：老家是湖北",
    "update_fit": "不是，是绿色", "ask_what": "记一下", "replace_maybe": "不是跳舞，是唱歌",
    "update_number": "把第1条改成我住在咸阳", "correct_last": "说错了，是我姐对猫过敏", "undo_delete": "恢复刚才删的那条",
    "unsay": "当我没说😅", "replace_said": "更正一下 小儿子在重庆 不在成都", "forget_last_maybe": "刚才那个删了",
    "update_actually": "其实我现在住在上海了", "forget_value": "忘记来福", "wish_revoke": "别叫我Kiki了",
    "fix_parts": "不对不对我说错了她在烟台上班不是青岛", "moved": "俺爸搬郑州去了",
}


@pytest.mark.parametrize("text,kind", [
    ("你觉得我是个什么样的人", "profile"), ("你觉得我是个什么样的人？", "profile"), ("我的画像", "profile"),
    ("小满，你眼中的我是什么样的", "profile"), ("我是个什么样的人", "profile"), ("/profile", "profile"),
    ("你觉得我是个好人吗", None), ("我的画像画好了吗", None), ("你觉得他是个什么样的人", None), ("画像", None),
])
def test_asking_for_the_profile(text, kind):
    assert bot.memory_parse(bot.onebot_addressed(text, ["小满"]) or text, ["小满"])[0] == kind


@pytest.mark.parametrize("kind, text", KIND_EXAMPLES.items())
def test_every_kind_has_a_handler_that_takes_its_arguments(kind, text):
    """MEMORY_COMMANDS (Memory) reads a message into a kind and named arguments; MEMORY_SETTLE settles a kind the
    words alone can't, MEMORY_ACTIONS (Replies) does the rest: every kind is known to one of them, by the names
    its arguments carry."""
    got, args = bot.memory_parse(text, ["小满"])
    assert got == kind
    if kind in bot.MEMORY_SETTLE:
        inspect.signature(bot.MEMORY_SETTLE[kind]).bind(None, None, **args)
    else:
        inspect.signature(bot.MEMORY_ACTIONS[kind].handler).bind(None, None, **args)


#: Kinds no command's words are read into, only a message memory_pointed reads as pointing at a memory (其实我现在转日服了
#: with 国服 and 美服 kept: which is asked), and the memory_commands.jsonl rows that reach each.
POINTED_KINDS = {"switch_ask": ("switch-two-spots-ask-1", "switch-no-spot-ask-1"), "pointed_ask": ("life-quit-two-ask",),
                 "life_replace": ("v20-pet-gone-1", "v20-baby-born-1"), "moved_ask": ("i20y-moved-work-ask-1",)}


def test_every_action_is_reached():
    assert set(bot.MEMORY_ACTIONS) | set(bot.MEMORY_SETTLE) == set(KIND_EXAMPLES) | set(POINTED_KINDS)
    rows = {json.loads(line)["id"] for line in (ROOT / "tests" / "data" / "memory_commands.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()}
    assert all(set(ids) <= rows for ids in POINTED_KINDS.values())


@pytest.mark.parametrize("word", bot.COMMAND_WORDS)
def test_the_name_then_a_command_word_addresses_the_bot(word):
    assert bot.onebot_addressed(f"小满{word}我住在北京", ["小满"]) == f"{word}我住在北京"


@pytest.mark.parametrize("fact,subject,attribute,value", [
    ("我住在北京", "我", "现居地", "北京"),
    ("我现在住在上海了", "我", "现居地", "上海"),
    ("我搬到了重庆", "我", "现居地", "重庆"),
    ("我们一家搬到大理了", "我", "现居地", "大理"),  # the household's home is the user's
    ("咱家搬到大连了", "我", "现居地", "大连"),
    ("我们公司搬到望京了", "我", None, None),  # a company's move is not
    ("娃的生日是5月1号", "孩子", "生日", "5月1号"),
    ("我老家是四川的", "我", "老家", "四川"),
    ("我的生日是三月五号", "我", "生日", "三月五号"),
    ("我妈妈的生日是5月3日", "妈妈", "生日", "5月3日"),
    ("我妈生日是5月3日", "妈妈", "生日", "5月3日"),
    ("我叫王小明", "我", "名字", "王小明"),
    ("我叫我女朋友小猪", "女朋友", "昵称", "小猪"),
    ("小美是我女朋友", "女朋友", "名字", "小美"),
    ("我今年28岁", "我", "年龄", "28"),
    ("我5岁的时候被狗咬过", "我", None, None),
    ("我对花生过敏", "我", "过敏", "花生"),
    ("我女儿对花生过敏", "女儿", "过敏", "花生"),
    ("我喜欢爬山", "我", "喜欢", "爬山"),
    ("我讨厌香菜", "我", "讨厌", "香菜"),
    ("我最喜欢的动漫是海贼王", "我", "最喜欢的动漫", "海贼王"),
    ("我养了一只柯基", "我", "宠物", "一只柯基"),
    ("我在腾讯上班", "我", "工作单位", "腾讯"),
    ("我是前端工程师", "我", "职业", "前端工程师"),
    ("我朋友阿强喜欢打游戏", "朋友阿强", "喜欢", "打游戏"),
    ("你叫我老大", "你", "称呼用户", "老大"),
    ("I live in Shanghai", "我", "现居地", "Shanghai"),
    ("我住院了", "我", None, None),
    # a kind of lodging, or how far, is not a home: 现居地 is where they live (it takes the profile's place);
    # a dorm or a rented flat is the life state 住处 (我住宿舍 → 我搬出来租房了 replaces it)
    ("我住校", "我", "住处", "住校"),
    ("我住校，宿舍在六楼", "我", "住处", "住校，宿舍在六楼"),
    ("我住在宿舍", "我", "住处", "住在宿舍"),
    ("我住学校宿舍", "我", "住处", "住学校宿舍"),
    ("我现在住在学校", "我", None, None),
    ("我住酒店", "我", None, None),
    ("我住在医院", "我", None, None),
    ("我住得很远", "我", None, None),
    ("我住的地方离公司很近", "我", None, None),
    ("我住在一楼", "我", None, None),
    ("我住在Garching的学生宿舍，离学校近", "我", "现居地", "Garching的学生宿舍"),
    ("我住在爷爷家", "我", "现居地", "爷爷家"),
    ("我住在海边", "我", "现居地", "海边"),
    ("我叫了外卖", "我", None, None),
    ("我生日快到了", "我", None, None),
    ("我生日3月5日", "我", "生日", "3月5日"),
])
def test_facts_are_taken_apart(fact, subject, attribute, value):
    f = bot.memory_fact(fact)
    assert (f.subject, f.attribute, f.value) == (subject, attribute, value)


@pytest.mark.parametrize("text,pieces", [
    ("我住在成都，对花生过敏，生日是3月1日", ["我住在成都", "我对花生过敏", "我生日是3月1日"]),
    ("我养了一只猫，叫年糕", ["我养了一只猫，叫年糕"]),
    ("我不吃香菜，因为小时候吃吐过", ["我不吃香菜，因为小时候吃吐过"]),
    ("我女朋友叫小美，她喜欢吃草莓蛋糕", ["我女朋友叫小美", "我女朋友喜欢吃草莓蛋糕"]),
    ("我喜欢猫，我老婆喜欢狗", ["我喜欢猫", "我老婆喜欢狗"]),
    ("我的口头禅是'); DROP TABLE memories;--", ["我的口头禅是'); DROP TABLE memories;--"]),
])
def test_one_fact_one_piece(text, pieces):
    assert bot.memory_split(text) == pieces


def test_options_mark_importance_and_public():
    assert bot.memory_options("这个很重要：我对花生过敏") == ("我对花生过敏", 2, None)
    assert bot.memory_options("(公开)我是猫奴") == ("我是猫奴", 1, "public")


def test_duplicate_refreshes_and_undo_says_nothing_changed(kconn):
    c = ctx()
    assert say(kconn, c, "我住在北京") == "好的，记住了：“我住在北京”。"
    assert "已经记着了" in say(kconn, c, "我住在北京！")
    assert texts(kconn) == ["我住在北京"]
    assert "没有改动任何记忆" in bot.memory_undo(kconn, c, nothing)
    assert texts(kconn) == ["我住在北京"]  # the refresh was undone, not the 记住 before it


def test_update_names_what_it_replaced_and_undo_restores(kconn):
    c = ctx()
    say(kconn, c, "我住在北京")
    say(kconn, c, "我对花生过敏")
    # a 记住 that replaces says what it replaced (an update says 已把…改成…)
    assert say(kconn, c, "我现在住在上海了").startswith("好的，记住了：“我现在住在上海了”（替换了『我住在北京』）")
    assert texts(kconn) == ["我现在住在上海了", "我对花生过敏"]
    old = json.loads(kconn.execute("SELECT old_row FROM memory_history WHERE action = 'update'").fetchone()[0])
    assert old["text"] == "我住在北京"
    assert "改回了“我住在北京”" in bot.memory_undo(kconn, c, nothing)
    assert texts(kconn) == ["我住在北京", "我对花生过敏"]
    hits = bot.memory_search(kconn, c, "北京", None, limit=5, min_similarity=1.0)
    assert [h["text"] for h in hits] == ["我住在北京"]  # the search index follows the text back


def test_subjects_are_kept_apart(kconn):
    c = ctx()
    for fact in ("我妈妈的生日是5月3日", "我的生日是8月8日", "我爸爸生日是10月1日", "我女儿对花生过敏", "我对花生过敏"):
        say(kconn, c, fact)
    assert len(texts(kconn)) == 5  # 爸爸's birthday is not a duplicate of 妈妈's
    assert bot.memory_forget(kconn, c, "我的生日", nothing)[0] == "已忘记：“我的生日是8月8日”（说“撤销”可以恢复）"
    assert bot.memory_forget(kconn, c, "我对花生过敏", nothing)[0] == "已忘记：“我对花生过敏”（说“撤销”可以恢复）"
    assert texts(kconn) == ["我妈妈的生日是5月3日", "我爸爸生日是10月1日", "我女儿对花生过敏"]


def test_many_valued_attributes_change_only_the_named_value(kconn):
    c = ctx()
    say(kconn, c, "我对花生过敏")
    say(kconn, c, "我对青霉素过敏", importance=2)
    msg = bot.memory_remember(kconn, c, "我对芒果过敏，不是花生", nothing, update=True)[0]
    assert msg.startswith("已把“我对花生过敏”改成“我对芒果过敏”")
    rows = kconn.execute("SELECT text, importance FROM memories ORDER BY id").fetchall()
    assert [tuple(r) for r in rows] == [("我对芒果过敏", 1), ("我对青霉素过敏", 2)]
    say(kconn, c, "我喜欢猫")
    assert "“我讨厌猫”（替换了『我喜欢猫』）" in say(kconn, c, "我讨厌猫")  # the same thing, the opposite feeling
    assert say(kconn, c, "我喜欢爬山").startswith("好的，记住了")


def test_which_one_question_and_its_answer(kconn):
    c = ctx()
    say(kconn, c, "我喜欢猫")
    say(kconn, c, "我喜欢狗")
    reply, asked = bot.memory_forget(kconn, c, "我喜欢的东西", nothing)
    assert "1. 我喜欢猫" in reply and "2. 我喜欢狗" in reply
    assert bot.memory_answer(kconn, c, asked, "今天天气不错", nothing) is None  # no answer: the message is itself
    again = bot.memory_answer(kconn, c, asked, "小鸟那个", nothing)  # an answer that fits none: asked once more
    assert again.startswith("没看明白") and "1. 我喜欢猫" in again and asked.pop("keep")
    assert bot.memory_answer(kconn, c, asked, "第二条", nothing).startswith("已忘记：“我喜欢狗”")
    assert texts(kconn) == ["我喜欢猫"]


@pytest.mark.parametrize("answer,left", [
    ("2", ["我喜欢猫"]), ("第二个", ["我喜欢猫"]), ("前面那个", ["我喜欢狗"]), ("最后那条", ["我喜欢猫"]),
    ("狗那个", ["我喜欢猫"]), ("是猫", ["我喜欢狗"]), ("都删了吧", []), ("两个都删", []), ("1和2", []),
    ("第一条、第二条", []), ("1 2", []),
])
def test_a_which_one_question_takes_answers_in_words(kconn, answer, left):
    c = ctx()
    say(kconn, c, "我喜欢猫")
    say(kconn, c, "我喜欢狗")
    asked = bot.memory_forget(kconn, c, "我喜欢的东西", nothing)[1]
    assert bot.memory_answer(kconn, c, asked, answer, nothing).startswith("已忘记")
    assert texts(kconn) == left


@pytest.mark.parametrize("answer", ["要的", "嗯嗯记住吧", "好呀", "没错", "可以啊", "记一下吧", "对对"])
def test_yes_in_words_answers_shall_i_remember(kconn, answer):
    c = ctx()
    asked = {"action": "store", "text": "我周六体检", "importance": 1, "ids": []}
    assert bot.memory_answer(kconn, c, asked, answer, nothing).startswith("好的，记住了")
    assert texts(kconn) == ["我周六体检"]


@pytest.mark.parametrize("answer", ["都不要", "不用记了", "别记了", "算了吧", "不了"])
def test_no_in_words_changes_nothing(kconn, answer):
    c = ctx()
    say(kconn, c, "我喜欢猫")
    say(kconn, c, "我喜欢狗")
    for asked in (bot.memory_forget(kconn, c, "我喜欢的东西", nothing)[1],
                  {"action": "store", "text": "我周六体检", "importance": 1, "ids": []}):
        assert bot.memory_answer(kconn, c, asked, answer, nothing) == "好的，那就不改了。"
    assert texts(kconn) == ["我喜欢猫", "我喜欢狗"]


_WHICH = {"action": "forget", "ids": [1, 2], "choices": ["我在杭州上班", "我妈在杭州开店"], "mine": [0]}
_STORE = {"action": "store", "text": "周五晚上聚餐", "ids": []}
_AREA = {"action": "area", "ids": [1], "choices": ["我养了一只仓鼠"], "mine": [0]}


@pytest.mark.parametrize("asked,answer,read", [
    (_WHICH, "我妈的", ("pick", [1])), (_WHICH, "开店那个", ("pick", [1])), (_WHICH, "第二個", ("pick", [1])),
    (_WHICH, "我自己那条吧😂", ("pick", [0])), (_WHICH, "上面那條", ("pick", [0])), (_WHICH, "都删了吧 🙃", ("pick", [0, 1])),
    (_WHICH, "1 2", ("pick", [0, 1])), (_WHICH, "杭州的", ("unclear",)), (_WHICH, "小猫那条", ("unclear",)),
    (_WHICH, "好的", ("unclear",)), (_WHICH, "算了算了 都留着吧", ("n",)), (_WHICH, "唔 还是别删了 两条都留着", ("n",)),
    (_WHICH, "都行", None), (_WHICH, "上班好累", None), (_WHICH, "今天好累啊 加班到十点", None), (_WHICH, "别删我妈那条", ("unclear",)),
    (_WHICH, "对了 记住我下周出差", None), (_WHICH, "撤销", None), (_WHICH, "确认删除", None),
    (_STORE, "嗯嗯 是我的 记吧", ("y",)), (_STORE, "对 记上", ("y",)), (_STORE, "好的呀~", ("y",)), (_STORE, "yes", ("y",)),
    (_STORE, "要要要", ("y",)), (_STORE, "不用了", ("n",)), (_STORE, "别记 随口说的", ("n",)),
    (_STORE, "要不要记呢 我再想想", ("w",)), (_STORE, "对了", None), (_STORE, "是的 我明天还要加班", None),
    (_STORE, "是吗？", None), (_AREA, "换掉换掉", ("pick", [0])), (_AREA, "两条都留着吧", ("pick", [1])),
    (_AREA, "算了 不记了", ("n",)), (_AREA, "我自己那条", ("unclear",)), (_AREA, "好的", ("unclear",)),
])
def test_an_answer_is_read_whole_and_a_message_of_its_own_is_none(asked, answer, read):
    """What the user says to the bot's question (#20, the user third): yes and no in more words, a choice named by
    its words; anything with words of its own (a fact, a new command, chat) is no answer."""
    assert bot.memory_answer_read(asked, answer) == read


def test_an_answer_that_picks_nothing_is_asked_once_more_then_dropped(kconn):
    c = ctx()
    say(kconn, c, "我喜欢猫")
    say(kconn, c, "我喜欢狗")
    asked = bot.memory_forget(kconn, c, "我喜欢的东西", nothing)[1]
    for answer in ("我的", "喜欢", "小鸟那条"):  # 我的: both are the user's; 喜欢: in both; 小鸟: in neither
        asked.pop("again", None)
        assert bot.memory_answer(kconn, c, asked, answer, nothing).startswith("没看明白你选的是哪一条。有几条都像")
    assert "先不改了" in bot.memory_answer(kconn, c, asked, "嗯？", nothing)
    assert bot.memory_answer(kconn, c, asked, "算了", nothing) == "好的，那就不改了。"
    assert texts(kconn) == ["我喜欢猫", "我喜欢狗"]


def test_forget_nothing_matches_deletes_nothing(kconn):
    c = ctx()
    say(kconn, c, "我喜欢吃辣")
    assert "没有找到" in bot.memory_forget(kconn, c, "我喜欢周杰伦", nothing)[0]
    assert "没有第9条" in bot.memory_forget_numbers(kconn, c, [9])
    assert texts(kconn) == ["我喜欢吃辣"]


def test_forget_several_numbers_is_one_undo(kconn):
    c = ctx()
    say(kconn, c, "我住在成都，对花生过敏，生日是3月1日")
    assert bot.memory_forget_numbers(kconn, c, [3, 1]) == "已忘记：“我住在成都”“我生日是3月1日”（说“撤销”可以恢复）"
    assert texts(kconn) == ["我对花生过敏"]
    bot.memory_undo(kconn, c, nothing)
    assert texts(kconn) == ["我住在成都", "我对花生过敏", "我生日是3月1日"]
    assert bot.memory_undo(kconn, c, nothing).startswith("已撤销：删掉了刚记下的")  # the 记住 of all three
    assert texts(kconn) == []


def test_pronoun_means_the_person_just_named(kconn):
    c = ctx()
    say(kconn, c, "我女朋友叫小美")
    assert say(kconn, c, "她喜欢吃草莓蛋糕") == "好的，记住了：“我女朋友喜欢吃草莓蛋糕”。"
    assert "是指谁" in say(kconn, c, "它三岁了")  # no pet was named
    assert texts(kconn) == ["我女朋友叫小美", "我女朋友喜欢吃草莓蛋糕"]


def test_memory_changes_are_synced_before_the_reply(kconn):
    """What the user is told is saved survives a power cut: the commit runs with synchronous=FULL."""
    seen = []
    kconn.set_trace_callback(seen.append)
    say(kconn, ctx(), "我住在北京")
    kconn.set_trace_callback(None)
    full, commit = seen.index("PRAGMA synchronous = FULL"), seen.index("COMMIT")
    assert full < commit < seen.index("PRAGMA synchronous = NORMAL", commit)
    assert kconn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL again for chat turns


def test_v1_database_is_migrated(tmp_path):
    """A database written by the first build: memories get their subjects, lore its own table."""
    path = tmp_path / "v1.db"
    old = v1_database(path)
    ins = ("INSERT INTO memories (user_id, type, character_id, scope, text, canonical, attribute, value, importance, "
           "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, 0, 0)")
    old.execute(ins, ("1", "user_fact", None, "private", "我妈妈住在上海", "用户妈妈住在上海", "住址", "上海"))
    old.execute(ins, ("1", "experience", "knight", "private", "你答应给我讲龙的故事", "你答应给我讲龙的故事", None, None))
    old.execute(ins, ("", "lore", "knight", "public", "王国在河谷", "王国在河谷", "keys", '["王国"]'))
    old.execute("INSERT INTO memory_history (user_id, memory_id, action, created_at) VALUES ('1', 1, 'insert', 0)")
    old.commit()
    old.close()
    conn = bot.db_connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == bot.SCHEMA_VERSION
    rows = [tuple(r) for r in conn.execute("SELECT text, subject, attribute, value, type FROM memories ORDER BY id")]
    assert rows == [("我妈妈住在上海", "妈妈", "现居地", "上海", "user_fact"), ("你答应给我讲龙的故事", "你", None, None, "experience")]
    assert [tuple(r) for r in conn.execute("SELECT character_id, keys, content FROM lore")] == [("knight", '["王国"]', "王国在河谷")]
    c = ctx()
    assert [h["text"] for h in bot.memory_search(conn, c, "上海", None, limit=5, min_similarity=1.0)] == ["我妈妈住在上海"]
    assert "删掉了" in bot.memory_undo(conn, c, nothing)  # the old history still undoes
    # the migrated database has the shape of a blank one: the same tables, columns and triggers
    blank = bot.db_connect(tmp_path / "blank.db")

    def shape(db):
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger', 'index') "
                                          "AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '%fts_%' AND name NOT LIKE '%vec_%'")]
        return {n: [tuple(c)[1:3] for c in db.execute(f"PRAGMA table_info({n})")] for n in sorted(names)}
    assert shape(conn) == shape(blank)

    def sql(db):
        """The SQL of every trigger, index and virtual (FTS5, vec0) table, whitespace normalised: the migrations
        repeat schema.sql's triggers and indexes, and the two copies must not drift."""
        return {r[0]: " ".join(r[1].split()) for r in db.execute(
            "SELECT name, sql FROM sqlite_master WHERE (type IN ('trigger', 'index') OR sql LIKE 'CREATE VIRTUAL %') "
            "AND sql IS NOT NULL")}
    assert {"memories_ai", "memories_au", "memories_reexpand", "messages_ai", "memories_key"} <= set(sql(blank))
    assert sql(conn) == sql(blank)


def test_duplicate_refreshes_instead_of_adding(conn_vec, embedder_vec):
    c = ctx()
    assert "记住了：“我住在北京”" in remember(conn_vec, embedder_vec, c, "我住在北京")
    again = remember(conn_vec, embedder_vec, c, "我住在北京！")
    assert "已经记着了" in again
    assert conn_vec.execute("SELECT count(*) FROM memories").fetchone()[0] == 1


def test_update_without_attribute_finds_the_nearest(conn_vec, embedder_vec):
    c = ctx()
    remember(conn_vec, embedder_vec, c, "我每周三晚上打羽毛球")
    msg = remember(conn_vec, embedder_vec, c, "我每周四晚上打羽毛球", update=True)
    assert "“我每周三晚上打羽毛球”改成“我每周四晚上打羽毛球”" in msg
    assert conn_vec.execute("SELECT count(*) FROM memories").fetchone()[0] == 1


def test_vector_duplicate_needs_the_same_subject(conn_vec, embedder_vec):
    c = ctx()
    remember(conn_vec, embedder_vec, c, "我男朋友喜欢打篮球")
    assert remember(conn_vec, embedder_vec, c, "我前男友喜欢打篮球").startswith("好的，记住了")
    assert remember(conn_vec, embedder_vec, c, "我姐姐在银行上班").startswith("好的，记住了")
    assert remember(conn_vec, embedder_vec, c, "我哥哥在银行上班").startswith("好的，记住了")
    assert conn_vec.execute("SELECT count(*) FROM memories").fetchone()[0] == 4


@pytest.mark.parametrize("query,expected", [
    ("这家店的汤里有香菜吗", "我不吃香菜"),
    ("北京", "我住在北京"),
    ("花生", "我对花生过敏"),
    ("python 的 requests 怎么设置超时", "我每天用Python写爬虫"),
    ('AND OR NOT "香菜 NEAR( * ^ -', "我不吃香菜"),
    ("'); DROP TABLE memories;-- 香菜", "我不吃香菜"),
])
def test_keyword_search_handles_two_char_words_mixed_and_operators(kconn, query, expected):
    c = ctx()
    for f in ("我住在北京", "我不吃香菜", "我对花生过敏", "我每天用Python写爬虫", "我妈妈住在上海", "我喜欢菜市场的热闹"):
        say(kconn, c, f)
    hits = bot.memory_search(kconn, c, query, None, limit=5, min_similarity=0.55)  # keyword only
    assert hits and hits[0]["text"] == expected


@pytest.mark.parametrize("query,expected", [
    ("明天天气怎么样", "我住在成都"),
    ("附近有什么好吃的", "我住在成都"),
    ("今天又加班到十点", "我是护士"),
    ("我家狗狗最近不爱吃饭", "我养了一只柯基"),
    ("蓉城最近有什么好玩的", "我住在成都"),
    ("今晚吃什么好", "我吃素"),
    ("我家那只最近不爱吃饭", None),
])
def test_everyday_words_bring_the_attribute_they_need(kconn, query, expected):
    c = ctx()
    for f in ("我住在成都", "我是护士", "我喜欢周杰伦", "我养了一只柯基", "我吃素"):
        say(kconn, c, f)
    hits = [h["text"] for h in bot.memory_search(kconn, c, query, None, limit=5, min_similarity=1.0)]
    assert (expected in hits) if expected else "我喜欢周杰伦" not in hits


def test_areas_never_cross_users(kconn):
    say(kconn, ctx("1"), "我养了一只柯基")
    say(kconn, ctx("2"), "我住在杭州")
    assert bot.memory_search(kconn, ctx("2"), "我家狗狗不爱吃饭", None, limit=5, min_similarity=1.0) == []
    assert [h["text"] for h in bot.memory_search(kconn, ctx("1"), "我家狗狗不爱吃饭", None, limit=5, min_similarity=1.0)] == \
        ["我养了一只柯基"]


def test_memories_are_retagged_once_when_the_lexicon_changes(kconn):
    c = ctx()
    say(kconn, c, "我养了一只柯基")
    assert bot.memory_retag(kconn) == 0  # a new database is tagged with the lexicon it was made with
    # as if tagged by an older lexicon that knew nothing of dogs
    kconn.execute("UPDATE memories SET areas = ''")
    bot.db_meta_set(kconn, "areas_lexicon", "older")
    assert bot.memory_search(kconn, c, "我家狗狗不爱吃饭", None, limit=5, min_similarity=1.0) == []
    assert bot.memory_retag(kconn) == 1 and bot.memory_retag(kconn) == 0
    assert [h["text"] for h in bot.memory_search(kconn, c, "我家狗狗不爱吃饭", None, limit=5, min_similarity=1.0)] == \
        ["我养了一只柯基"]


def test_profile_follows_updates_and_stays_within_its_budget(kconn):
    c = ctx()
    for f in ("我叫阿杰", "我住在北京", "我对花生过敏", "我对青霉素过敏", "我有高血压", "我喜欢爬山"):
        say(kconn, c, f)
    say(kconn, c, "我每天要吃降压药", importance=2)
    profile = [r["text"] for r in bot.memory_profile(kconn, c)]
    assert len(profile) == 4 and profile[:3] == ["我叫阿杰", "我住在北京", "我每天要吃降压药"] and "我喜欢爬山" not in profile
    say(kconn, c, "我搬到了上海")
    bot.memory_forget(kconn, c, "我的名字", nothing)
    profile = [r["text"] for r in bot.memory_profile(kconn, c)]
    assert "我搬到了上海" in profile and "我叫阿杰" not in profile and "我住在北京" not in profile


def test_prompt_gets_at_most_top_k_memories(runner, napcat, llm):
    for f in ("我叫阿杰", "我住在北京", "我对花生过敏", "我有高血压", "我喜欢吃火锅", "我不吃香菜", "我吃素", "我喜欢喝奶茶"):
        napcat.ask(809, "记住，" + f)
    napcat.ask(809, "今晚吃什么好")
    part = system_part(llm.chat_requests()[-1]["json"]["messages"], "参考资料")
    # the profile (the user's own words while no LLM wrote one) has room for all eight: each is there once, and
    # the places of 关于用户 (at most MEMORY_TOP_K) take nothing the profile already says
    assert all(part.count(f"“{f}”") == 1 for f in ("我叫阿杰", "我住在北京", "我对花生过敏", "我吃素", "我喜欢喝奶茶"))
    assert "【关于用户】" not in part
    for n in range(20):  # more than the profile holds: the search's places fill again, MEMORY_TOP_K at most
        napcat.ask(809, f"记住，我收藏了第{n}张很难买到的黑胶唱片")
    napcat.ask(809, "黑胶唱片怎么保养")
    part = system_part(llm.chat_requests()[-1]["json"]["messages"], "参考资料")
    profile, memories = part.split("【关于用户】")
    assert memories.count("用户说过") == 5 and "“我叫阿杰”" in profile
    assert all(part.count(f"第{n}张") <= 1 for n in range(20)) and bot.text_count_tokens(profile) <= bot.PROFILE_TOKENS + 20


def _expanded(runner, n):
    """True once n memories have their expansion stored (the bot asks for them in the background)."""
    conn = bot.db_connect(runner.cfg.BOT_DB)
    try:
        return conn.execute("SELECT count(*) FROM memories WHERE expansion IS NOT NULL").fetchone()[0] >= n
    finally:
        conn.close()


def _prompt_memories(llm):
    part = system_part(llm.chat_requests()[-1]["json"]["messages"], "参考资料")
    return [part] if part else []


def test_expansion_words_find_a_memory_and_follow_its_changes(runner, napcat, llm, monkeypatch):
    monkeypatch.setattr(bot, "EXPAND_QUIET_SECONDS", 0.2)  # what expansions find, not when they are asked (1 s)
    llm.expansions = {"我是原神玩家，主玩胡桃": "原神 往生堂 堂主 深渊 米哈游 Genshin",
                      "我是原神玩家，主玩雷电将军": "稻妻 雷神 深渊 米哈游"}
    ask = lambda t, user=812: napcat.ask(user, t)
    ask("记住，我是原神玩家，主玩胡桃")
    ask("记住，我住在北京")
    ask("记住我喜欢爬山", user=813)
    assert wait_for(lambda: _expanded(runner, 3))
    assert sorted(llm.expansion_requests()) == sorted(["我是原神玩家，主玩胡桃", "我住在北京", "我喜欢爬山"])  # each once
    # what the search finds (the prompt's profile quotes both of 812's memories whatever is said: see the profile tests)
    found = lambda t, user="812": runner.db(lambda c: [r["text"] for r in bot.memory_search(
        c, ctx(user), t, None, limit=5, min_similarity=1.0, touch=False)])
    assert found("这期往生堂堂主打不过去了") == ["我是原神玩家，主玩胡桃"]  # no word of the memory, only of its expansion
    ask("这期往生堂堂主打不过去了")
    assert "主玩胡桃" in _prompt_memories(llm)[0]
    ask("往生堂堂主好难练", user=813)  # another user's expansion never reaches them
    assert not any("胡桃" in p for p in _prompt_memories(llm)) and found("往生堂堂主好难练", "813") == []
    # reworded: the old expansion goes at once and the LLM is asked again
    assert ask("更正一下，我是原神玩家，主玩雷电将军").startswith("已把")
    assert wait_for(lambda: llm.expansion_requests()[-1] == "我是原神玩家，主玩雷电将军")
    assert wait_for(lambda: _expanded(runner, 3))
    assert found("往生堂堂主好难练") == []
    assert found("稻妻的风景真好看") == ["我是原神玩家，主玩雷电将军"]
    # forgotten: its expansion goes with it
    assert ask("忘记我玩原神的事").startswith("已忘记")
    conn = bot.db_connect(runner.cfg.BOT_DB)
    assert conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'extra : 稻妻'").fetchone()[0] == 0
    assert bot.search_keyword(conn, "memories_fts", "812", "稻妻 米哈游", expansion=True) == []
    conn.close()


def test_expansions_wait_out_an_llm_outage_and_give_up_only_on_unusable_replies(runner, napcat, llm, monkeypatch):
    monkeypatch.setattr(bot, "EXPAND_RETRY_SECONDS", 0.05)
    monkeypatch.setattr(bot, "EXPAND_QUIET_SECONDS", 0.2)  # the quiet before each is not what this test is about
    llm.expansions = {"我住在北京": {"status": 503, "headers": {"Retry-After": "0"}}, "我喜欢爬山": {"body": "{}"}}
    napcat.ask(815, "记住，我住在北京")
    assert wait_for(lambda: llm.expansion_requests().count("我住在北京") >= 9)  # three rounds of three tries
    assert not _expanded(runner, 1)  # the LLM was down: the memory is not given up
    llm.expansions["我住在北京"] = "首都 故宫"
    assert wait_for(lambda: _expanded(runner, 1))
    napcat.ask(815, "记住我喜欢爬山")  # answered, but with nothing usable: asked EXPAND_ATTEMPTS times, then none
    assert wait_for(lambda: _expanded(runner, 2))
    assert llm.expansion_requests().count("我喜欢爬山") == bot.EXPAND_ATTEMPTS
    conn = bot.db_connect(runner.cfg.BOT_DB)
    assert [tuple(r) for r in conn.execute("SELECT text, expansion FROM memories ORDER BY id")] == [
        ("我住在北京", "首都 故宫"), ("我喜欢爬山", "")]
    conn.close()
    assert "echo:" in napcat.ask(815, "今天天气不错")  # chat went on throughout


def test_an_expansion_for_words_the_memory_no_longer_has_is_dropped(kconn):
    c = ctx()
    say(kconn, c, "我住在北京")
    (memory_id, text, _), = [tuple(r) for r in bot.memory_expansion_todo(kconn)]
    assert bot.memory_remember(kconn, c, "我搬到上海了", nothing, update=True)[0].startswith("已把")  # while the LLM answered
    assert bot.memory_expansion_store(kconn, memory_id, text, "首都 故宫 长城") is False
    assert bot.search_keyword(kconn, "memories_fts", "1", "故宫", expansion=True) == []
    assert [tuple(r)[:2] for r in bot.memory_expansion_todo(kconn)] == [(memory_id, "我搬到上海了")]
    assert bot.memory_expansion_store(kconn, memory_id, "我搬到上海了", "1. 魔都、外滩 上海\n2. shanghai") is True
    assert kconn.execute("SELECT expansion FROM memories").fetchone()[0] == "魔都 外滩 shanghai"
    assert bot.memory_expansion_todo(kconn) == []


def test_a_reworded_memory_loses_its_old_expansion_from_the_index_at_once(kconn):
    c = ctx()
    say(kconn, c, "我住在北京")
    (memory_id, text, _), = [tuple(r) for r in bot.memory_expansion_todo(kconn)]
    assert bot.memory_expansion_store(kconn, memory_id, text, "首都 故宫 长城")
    assert [i for i, _ in bot.search_keyword(kconn, "memories_fts", "1", "故宫", expansion=True)] == [memory_id]
    assert bot.search_keyword(kconn, "memories_fts", "1", "故宫") == []  # what forget and update search
    bot.memory_remember(kconn, c, "我搬到上海了", nothing, update=True)
    assert bot.search_keyword(kconn, "memories_fts", "1", "故宫", expansion=True) == []
    assert kconn.execute("SELECT expansion FROM memories").fetchone()[0] is None
    assert "已撤销" in bot.memory_undo(kconn, c, nothing)  # back to 北京, with the words it had
    assert [i for i, _ in bot.search_keyword(kconn, "memories_fts", "1", "故宫", expansion=True)] == [memory_id]


def test_an_expansion_never_picks_what_a_forget_deletes(kconn):
    c = ctx()
    say(kconn, c, "我小时候常跟外公在河边钓鱼")
    say(kconn, c, "我周末去水库钓鱼")
    for n in range(31):  # enough memories whose expansions mention 外公 and 钓鱼 to fill the keyword candidates
        say(kconn, c, f"我周末去第{n}号公园散步")
    for memory_id, text, _ in bot.memory_expansion_todo(kconn, limit=100):
        bot.memory_expansion_store(kconn, memory_id, text, "钓鱼 外公 河边 钓鱼竿" if "公园" in text else "童年")
    reply, asked = bot.memory_forget(kconn, c, "外公钓鱼的事", nothing)
    assert asked is not None and "河边钓鱼" in reply and "水库钓鱼" in reply  # both fit: it asks, as without expansions
    assert len(texts(kconn)) == 33


def test_a_job_memory_comes_with_work_talk_a_commute_does_not(kconn):
    c = ctx()
    for f in ("我是护士", "我每天骑电动车上班", "我喜欢追剧"):
        say(kconn, c, f)
    hits = [h["text"] for h in bot.memory_search(kconn, c, "今天又加班到十点，心累", None, limit=5, min_similarity=1.0)]
    assert hits == ["我是护士"]


def test_shared_characters_fill_only_the_free_places(kconn):
    c = ctx()
    for f in ("我爸爸会修收音机", "我喜欢爬山", "我住在杭州", "我对花生过敏"):
        say(kconn, c, f)
    prompt = lambda q, limit=5, who=c: [(r["text"], how) for r, how in bot.memory_for_prompt(
        kconn, who, q, None, limit=limit, min_similarity=1.0)]
    # no word in common, two characters (修, 机): it comes after the real matches and the profile
    assert prompt("家里那台老机器坏了，想找人修一修") == [("我住在杭州", "profile"), ("我对花生过敏", "profile"),
                                                  ("我爸爸会修收音机", "characters")]
    assert prompt("杭州的老机器坏了，找人修")[0] == ("我住在杭州", "search")
    # the profile keeps its places: the fill takes only what is still free
    assert prompt("家里那台老机器坏了，想找人修一修", limit=2) == [("我住在杭州", "profile"), ("我对花生过敏", "profile")]
    # one character, or only common ones (今天, 家, 人), is not enough; never another user's
    assert [how for _, how in prompt("机器人大赛")] == ["profile", "profile"]
    assert [how for _, how in prompt("今天家里好多人")] == ["profile", "profile"]
    assert prompt("家里那台老机器坏了，想找人修一修", who=ctx("2")) == []


def test_search_is_isolated_by_user_and_by_chat(kconn):
    a, b = ctx("1"), ctx("2")
    say(kconn, a, "我住在北京")
    say(kconn, b, "我住在广州")
    assert [h["text"] for h in bot.memory_search(kconn, b, "我住在哪里", None, limit=5, min_similarity=1.0)] == ["我住在广州"]
    assert "广州" not in bot.memory_format_list(bot.memory_list(kconn, a))
    assert "没有找到" in bot.memory_forget(kconn, a, "广州", nothing)[0]
    # told in private: not seen in a group until made public
    in_group = ctx("1", group="500")
    assert bot.memory_list(kconn, in_group) == []
    bot.memory_set_scope(kconn, a, 1, True)
    assert [r["text"] for r in bot.memory_list(kconn, in_group)] == ["我住在北京"]
    # told in group 500: seen there and in private, not in group 600
    say(kconn, in_group, "我是群主")
    assert len(bot.memory_list(kconn, ctx("1", group="600"))) == 1
    assert len(bot.memory_list(kconn, a)) == 2


def test_commands_through_qq(runner, napcat, llm):
    ask = lambda t: napcat.ask(801, t)
    assert ask("记住，我住在北京") == "好的，记住了：“我住在北京”。"
    assert ask("记住，这个很重要：我对青霉素过敏") == "好的，记住了：“我对青霉素过敏”（标为重要）。"
    assert "已经记着了" in ask("请记住 我住在北京")
    assert ask("更新一下，我现在住在上海了").startswith("已把“我住在北京”改成“我现在住在上海了”")
    listing = ask("你记得我什么")
    assert "1. 我现在住在上海了" in listing and "2. 我对青霉素过敏（重要）" in listing
    assert ask("撤销") == "已撤销：改回了“我住在北京”。"
    assert ask("忘记第2条").startswith("已忘记：“我对青霉素过敏”")
    assert ask("记住明天下午三点开会").startswith("要我记住『明天下午三点开会』吗")
    assert ask("要") == "好的，记住了：“我明天下午三点开会”。"
    assert llm.chat_requests() == []  # writes wait for no LLM call (expansions run in the background)
    # in a group, after an @
    napcat.event(801, " 记住，我周末去爬山", group_id=321, at_bot=True)
    assert "记住了：“我周末去爬山”" in napcat.reply_text()
    # the fact reaches the prompt when it matters
    ask("北京今天冷不冷")
    context = [m["content"] for m in llm.requests[-1]["json"]["messages"] if m["role"] == "system"]
    assert any("我住在北京" in c for c in context)


def test_which_one_question_through_qq(runner, napcat, llm):
    ask = lambda t: napcat.ask(807, t)
    ask("记住我哥哥在上海工作")
    ask("记住我姐姐在上海工作")
    question = ask("忘记在上海工作的那条")
    assert "1. 我哥哥在上海工作" in question and "2. 我姐姐在上海工作" in question
    assert ask("2").startswith("已忘记：“我姐姐在上海工作”")
    assert ask("2") == "echo:2"  # answered: a second "2" is chat again
    assert runner.db(lambda c: [r[0] for r in c.execute("SELECT text FROM memories WHERE user_id = '807'")]) == ["我哥哥在上海工作"]


def test_memory_rate_limit_and_cap_through_qq(env, llm):
    r = Runner(dict(env, MEMORY_RATE_LIMIT="5", MEMORY_MAX_PER_USER="8", BOT_SUPERUSERS="42"))
    try:
        c = NapCat(r.cfg.ONEBOT_PORT)
        replies = [c.ask(808, f"记住，我第{i}次去了长城") for i in range(6)]
        assert all(x.startswith("好的") for x in replies[:5])
        assert "太快" in replies[5]
        c.event(808, "记住，我第6次去了长城")  # told once a minute: nothing more said
        assert c.barrier(808, "你记得我什么", answer="我记得关于你的5件事") == []  # lists are counted apart
        for i in range(9):  # a superuser is exempt from both
            assert c.ask(42, f"记住，我第{i}次去了故宫").startswith("好的"), i
        status = c.ask(42, "/status")
        assert "42（9条）" in status and "808（5条）" in status
        c.close()
    finally:
        r.stop()
    r = Runner(dict(env, MEMORY_RATE_LIMIT="0", MEMORY_MAX_PER_USER="7"))
    try:
        c = NapCat(r.cfg.ONEBOT_PORT)
        assert c.ask(808, "记住，我第5次去了长城").startswith("好的")
        assert c.ask(808, "记住，我第6次去了长城").startswith("好的")
        full = c.ask(808, "记住，我第7次去了长城")
        assert "记不下更多了" in full and "忘记第N条" in full
        assert c.ask(808, "忘记第1条").startswith("已忘记")  # forgetting still works at the cap
        c.close()
    finally:
        r.stop()


def test_forget_everything_needs_confirmation(runner, napcat):
    ask = lambda t: napcat.ask(802, t)
    ask("记住，我住在北京")
    ask("记住，我喜欢猫")
    assert "确认删除" in ask("忘记关于我的一切")
    assert "2条" in ask("确认删除。")
    assert "还没有记住" in ask("你记得我什么")
    assert "没有待确认的删除" in ask("确认删除")


def test_offers_to_remember_nothing_without_being_asked(runner, napcat):
    napcat.ask(803, "我住在成都")  # a statement, not a command: nothing is stored
    assert runner.db(lambda c: c.execute("SELECT count(*) FROM memories WHERE user_id = '803'").fetchone()[0]) == 0


def test_export_import_round_trip(env, tmp_path):
    src = tmp_path / "in.jsonl"
    lines = [{"user_id": "1", "text": "我住在北京", "expansion": "首都 故宫"}, {"user_id": "1", "text": "我对花生过敏", "importance": 2},
             {"user_id": "2", "text": "我喜欢爬山", "scope": "public", "created_at": 1700000000.0}]
    src.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    p = run_bot("memory", "import", src, env=env)
    assert p.returncode == 0 and "imported 3 memories" in p.stdout, p.stderr
    p = run_bot("memory", "export", env=env)
    out = [json.loads(x) for x in p.stdout.splitlines()]
    assert [(o["user_id"], o["text"], o["importance"], o["scope"]) for o in out] == [
        ("1", "我住在北京", 1, "private"), ("1", "我对花生过敏", 2, "private"), ("2", "我喜欢爬山", 1, "public")]
    assert out[2]["created_at"] == 1700000000.0 and (out[0]["subject"], out[0]["attribute"]) == ("我", "现居地")
    # an exported expansion comes back as it was (the LLM is not asked again); the others are still to ask
    assert [o["expansion"] for o in out] == ["首都 故宫", None, None]
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
        assert any("我不吃香菜" in m["content"] for m in llm.requests[-1]["json"]["messages"] if m["role"] == "system")
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


def test_undo_never_touches_another_users_row(conn_vec, embedder_vec):
    a, b = ctx("1"), ctx("2")
    embed = lambda t: embedder_vec.encode([t])[0]
    remember(conn_vec, embedder_vec, a, "我对青霉素过敏")
    bot.memory_forget_numbers(conn_vec, a, [1])
    remember(conn_vec, embedder_vec, b, "我养了一只猫叫年糕")  # ids are never reused, so this is not id 1
    assert "恢复了“我对青霉素过敏”" in bot.memory_undo(conn_vec, a, embed)
    assert [r["text"] for r in bot.memory_list(conn_vec, b)] == ["我养了一只猫叫年糕"]
    assert "删掉了" in bot.memory_undo(conn_vec, b, embed)
    assert [r["text"] for r in bot.memory_list(conn_vec, a)] == ["我对青霉素过敏"]


def test_undo_in_a_group_leaves_private_changes_alone(kconn):
    private, group = ctx("1"), ctx("1", group="500")
    say(kconn, private, "我对青霉素过敏")
    msg = bot.memory_undo(kconn, group, nothing)
    assert "青霉素" not in msg and "别处" in msg
    assert len(bot.memory_list(kconn, private)) == 1


def test_forget_last_in_a_group_leaves_a_private_memory_and_says_where_it_is(kconn):
    private, group = ctx("1"), ctx("1", group="500")
    say(kconn, private, "我对青霉素过敏")
    msg = bot.memory_forget_last(kconn, group)
    assert "青霉素" not in msg and "别处" in msg and "不在了" not in msg
    assert len(bot.memory_list(kconn, private)) == 1


def test_update_keeps_scope_and_public_mark_applies_to_duplicates(kconn):
    c = ctx("1")
    say(kconn, c, "我住在北京", scope="public")
    say(kconn, c, "我现在住在上海了")
    assert kconn.execute("SELECT scope FROM memories").fetchone()[0] == "public"
    say(kconn, c, "我喜欢爬山")
    say(kconn, c, "我喜欢爬山", scope="public")
    assert kconn.execute("SELECT scope FROM memories WHERE text = '我喜欢爬山'").fetchone()[0] == "public"


def test_forgotten_commands_do_not_come_back_through_old_turns(runner, napcat, llm):
    napcat.ask(806, "记住，我对青霉素过敏")
    for i in range(8):
        napcat.ask(806, f"随便聊聊第{i}句")
    napcat.ask(806, "忘记关于我的一切")
    napcat.ask(806, "确认删除")
    napcat.ask(806, "医生要给我开青霉素，可以吗")
    assert "青霉素过敏" not in json.dumps(llm.chat_requests()[-1]["json"]["messages"], ensure_ascii=False)


def test_import_reports_bad_types_by_line(tmp_path):
    embedder = bot.Embedder("off")
    conn = bot.db_connect(tmp_path / "i.db")
    lines = ['{"user_id": "1", "text": 123}', '{"user_id": "1", "text": "好", "importance": "high"}',
             '{"user_id": "1", "text": "好", "type": "experience"}', '{"user_id": "1", "text": "好"}']
    n, _, errors = bot.memory_import_rows(conn, embedder, lines)
    assert n == 0 and [e.split(":")[0] for e in errors] == ["line 1", "line 2", "line 3"]
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0


def test_an_import_indexes_exactly_as_one_memory_at_a_time_does(tmp_path):
    """memory_import_rows fills the FTS index in one go, with the insert trigger off meanwhile: the index must
    hold what the trigger writes, the trigger must be back, and an export's subject/attribute are kept as given."""
    embedder = bot.Embedder("off")
    lines = [{"user_id": "1", "text": "我住在北京", "expansion": "首都 故宫"}, {"user_id": "1", "text": "我对花生过敏", "importance": 2},
             {"user_id": "2", "text": "我妈妈喜欢爬山"},
             {"user_id": "2", "text": "他喜欢喝茶", "subject": "爸爸", "attribute": "喜欢", "value": "喝茶"}]
    bulk = bot.db_connect(tmp_path / "bulk.db")
    bulk.execute("INSERT INTO memories (user_id, type, text, created_at, updated_at) VALUES ('9', 'user_fact', '旧的', 0, 0)")
    assert bot.memory_import_rows(bulk, embedder, [json.dumps(x, ensure_ascii=False) for x in lines]) == (4, 0, [])
    one = bot.db_connect(tmp_path / "one.db")
    one.execute("INSERT INTO memories (user_id, type, text, created_at, updated_at) VALUES ('9', 'user_fact', '旧的', 0, 0)")
    with bot.db_tx(one):
        for x in lines:
            f = bot.memory_fact(x["text"])
            subject, attribute, value = x.get("subject", f.subject), x.get("attribute", f.attribute), x.get("value", f.value)
            memory_id = bot.memory_insert(one, None, user_id=x["user_id"], text=x["text"], subject=subject, attribute=attribute,
                                          value=value, importance=x.get("importance", 1))
            if "expansion" in x:
                one.execute("UPDATE memories SET expansion = ? WHERE id = ?", (x["expansion"], memory_id))

    def index(db):
        return [tuple(r) for r in db.execute("SELECT rowid, tokens, owner, extra FROM memories_fts ORDER BY rowid")]
    assert index(bulk) == index(one) and len(index(bulk)) == 5
    assert [tuple(r) for r in bulk.execute("SELECT subject, attribute, value, areas FROM memories ORDER BY id")] == \
        [tuple(r) for r in one.execute("SELECT subject, attribute, value, areas FROM memories ORDER BY id")]
    assert bulk.execute("SELECT sql FROM sqlite_master WHERE name = 'memories_ai'").fetchone() == \
        one.execute("SELECT sql FROM sqlite_master WHERE name = 'memories_ai'").fetchone()
    bot.memory_insert(bulk, None, user_id="3", text="我养了一只猫")  # the trigger indexes what comes after
    assert [i for i, _ in bot.search_keyword(bulk, "memories_fts", "3", "猫")] == [6]


def test_the_rule_profile_puts_who_the_user_is_first_and_fits_its_budget(kconn):
    c = ctx()
    for f in ("我喜欢爬山", "我对花生过敏", "我住在北京", "我养了一只叫年糕的猫", "我是护士", "我叫阿杰", "我今年28岁"):
        say(kconn, c, f)
    say(kconn, c, "我每天要吃降压药", importance=2)
    kconn.execute("UPDATE memories SET use_count = 5 WHERE text = '我养了一只叫年糕的猫'")
    profile = bot.memory_profile_for_prompt(kconn, c)
    assert profile["method"] == "rule" and profile["wanted"]
    assert [r["text"] for r in profile["sources"]] == ["我叫阿杰", "我今年28岁", "我住在北京", "我是护士", "我每天要吃降压药",
                                                       "我对花生过敏", "我养了一只叫年糕的猫", "我喜欢爬山"]
    assert profile["text"].startswith("用户说过：“我叫阿杰”“我今年28岁”")
    for n in range(40):  # many more than fit: the budget holds, and who they are stays first
        say(kconn, c, f"我收藏了第{n}张很难买到的黑胶唱片，是一九七几年的日本首版")
    profile = bot.memory_profile_for_prompt(kconn, c)
    assert bot.text_count_tokens(profile["text"]) <= bot.PROFILE_TOKENS and profile["sources"][0]["text"] == "我叫阿杰"
    # in a group only what is public there
    say(kconn, c, "我喜欢打羽毛球", scope="public")
    group = bot.memory_profile_for_prompt(kconn, ctx(group="5"))
    assert [r["text"] for r in group["sources"]] == ["我喜欢打羽毛球"] and not group["wanted"]
    assert bot.memory_profile_for_prompt(kconn, ctx(user="2")) is None


@pytest.mark.parametrize("reply", [
    "今天天气真不错，适合出去玩，记得带伞。",  # nothing from the memories
    "抱歉，我无法提供用户画像。",
    "",
    "用户" * 200,  # nothing of the memories, and far over the budget
])
def test_a_reply_that_is_no_profile_of_the_memories_is_refused(reply):
    rows = [{"text": t} for t in ("我叫阿杰", "我住在北京", "我对花生过敏", "我喜欢爬山")]
    assert bot.memory_profile_check(reply, rows) is None


#: Answers to the bot's real profile prompts, written by a helper who saw only each prompt (not the memories' source
#: sets nor this code): what a careful model gives back, recorded.
PROFILE_ANSWERS = [json.loads(line) for line in
                   (ROOT / "tests" / "data" / "profile_answers.jsonl").read_text(encoding="utf-8").splitlines() if line]


@pytest.mark.parametrize("row", PROFILE_ANSWERS, ids=[r["id"] for r in PROFILE_ANSWERS])
def test_recorded_profiles_are_kept_within_the_budget_and_keep_the_allergies(row):
    """A model's profile of real memories passes the check, fits PROFILE_TOKENS, and an allergy it kept survives the cut
    (the prompt is the bot's own: a changed PROFILE_PROMPT makes these answers stale, and this test says so)."""
    assert row["messages"][0]["content"] == bot.PROFILE_PROMPT, "PROFILE_PROMPT changed: record new answers"
    memories = [line.lstrip("- ").strip() for line in row["messages"][-1]["content"].splitlines() if line.strip()]
    kept = bot.memory_profile_check(row["reply"], [{"text": m} for m in memories])
    assert kept and bot.text_count_tokens(kept) <= bot.PROFILE_TOKENS
    allergens = {m.group(1) for t in memories for m in [re.search(r"对(.{1,4}?)过敏", t)] if m}
    assert any(a in kept for a in allergens) or not allergens, (kept, allergens)


def _profile_row(runner, user):
    return runner.db(lambda c: c.execute("SELECT text FROM profiles WHERE user_id = ?", (user,)).fetchone())


def test_the_llm_profile_rides_in_prompts_and_follows_every_correction(runner, napcat, llm, monkeypatch):
    """Replies are written by hand for this test (not recorded from a model): it checks what the bot does with them."""
    monkeypatch.setattr(bot, "PROFILE_DEBOUNCE_SECONDS", 0.3)
    monkeypatch.setattr(bot, "EXPAND_QUIET_SECONDS", 0.05)
    llm.profile_script = ["用户叫阿杰，住在北京，对花生过敏，喜欢爬山，周末常去爬山。"]
    for f in ("我叫阿杰", "我住在北京", "我对花生过敏", "我喜欢爬山"):
        assert "记住了" in napcat.ask(820, "记住，" + f)
    shown = napcat.ask(820, "我的画像")  # before the LLM has written it: the user's own words
    assert "“我叫阿杰”" in shown and "1. 我叫阿杰" in shown
    assert wait_for(lambda: _profile_row(runner, "820"))
    assert llm.profile_requests()[-1].splitlines() == ["我叫阿杰", "我住在北京", "我对花生过敏", "我喜欢爬山"]
    shown = napcat.ask(820, "你觉得我是个什么样的人")
    assert "用户叫阿杰，住在北京" in shown and "4. 我喜欢爬山" in shown
    napcat.ask(820, "周末去哪玩好")
    system = "\n".join(m["content"] for m in llm.chat_requests()[-1]["json"]["messages"] if m["role"] == "system")
    assert "【用户画像】\n- 用户叫阿杰，住在北京" in system
    assert runner.db(lambda c: c.execute("SELECT count(*) FROM memories WHERE user_id = '820'").fetchone()[0]) == 4
    # a correction drops the old profile at once; the rule's one (with the new words) stands in until the LLM writes again
    llm.profile_script = ["用户叫阿杰，住在上海，对花生过敏，喜欢爬山。"]
    assert "上海" in napcat.ask(820, "更正一下，我住在上海")
    assert "北京" not in (_profile_row(runner, "820") or [""])[0]  # gone (or already written anew)
    shown = napcat.ask(820, "我的画像")
    assert "“我住在上海”" in shown and "北京" not in shown
    assert wait_for(lambda: (_profile_row(runner, "820") or [""])[0].startswith("用户叫阿杰，住在上海"))
    # forgotten: gone from the profile too
    llm.profile_script = ["用户叫阿杰，住在上海，喜欢爬山。"]
    assert "已忘记" in napcat.ask(820, "忘记我对花生过敏")
    assert "花生" not in napcat.ask(820, "我的画像")
    assert wait_for(lambda: _profile_row(runner, "820"))
    # nonsense, then a reply that is no chat completion: the rule's profile stays, nothing is stored, and the same
    # memories are not asked about again
    asked = len(llm.profile_requests())
    llm.profile_script = ["今天天气真不错，适合出去玩。", {"body": "{}"}]
    napcat.ask(820, "记住，我养了一只猫")
    assert wait_for(lambda: len(llm.profile_requests()) > asked)
    napcat.ask(820, "记住，我在学日语")
    assert wait_for(lambda: len(llm.profile_requests()) > asked + 1)
    assert "天气" not in _profile_row(runner, "820")[0]  # the older one, for other memories: not shown
    shown = napcat.ask(820, "我的画像")
    assert "“我养了一只猫”" in shown and "天气" not in shown
    assert runner.db(lambda c: c.execute("SELECT count(*) FROM memories WHERE user_id = '820'").fetchone()[0]) == 5
    napcat.ask(820, "周末去哪玩好")
    system = "\n".join(m["content"] for m in llm.chat_requests()[-1]["json"]["messages"] if m["role"] == "system")
    assert "【用户画像】\n- 用户说过：“我叫阿杰”" in system and "天气" not in system
    assert len(llm.profile_requests()) == asked + 2
