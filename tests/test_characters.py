"""Characters: characters.json checks, hot reload, switching through QQ, the data boundaries
between characters, memory filters, the out-of-character check and card import.

Everything runs for real: the bot in a thread (Runner), NapCat over the WebSocket, the fake
OpenAI-compatible LLM over HTTP, a database file in tmp_path, `python bot.py` as a subprocess."""

import base64
import json
import os
import struct
import zlib
from pathlib import Path

import pytest

import bot
from conftest import assert_one_error_line
from fakes import ROOT, run_bot, system_part, wait_for

CARDS = json.loads((ROOT / "characters.json").read_text(encoding="utf-8"))
BY_ID = {c["id"]: c for c in CARDS["characters"]}


# Helpers ###################################################################

def cards_with(change):
    """The shipped characters.json as a dict, changed by change(data)."""
    data = json.loads(json.dumps(CARDS))
    change(data)
    return data


def parse_error(data):
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    with pytest.raises(bot.CharacterError) as e:
        bot.character_parse(text)
    msg = str(e.value)
    assert "Fix:" in msg
    return msg


def rewrite(path, text):
    """Writes the characters file and gives it an mtime the bot has surely not seen yet."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before, before + 1_000_000_000))
    assert path.stat().st_mtime_ns != before


def system_text(req):
    return "\n".join(m["content"] for m in req["json"]["messages"] if m["role"] == "system")


def context_text(req):
    """The '参考资料' part of the system message (memories, summaries, lore, older turns), or ''."""
    return system_part(req["json"]["messages"], "参考资料") or ""


def all_text(req):
    return "\n".join(m["content"] for m in req["json"]["messages"])


def chat(napcat, llm, user, text, **kw):
    """Sends one message; returns (reply text, the chat requests the LLM got for it)."""
    n = len(llm.chat_requests())
    reply = napcat.ask(user, text, **kw).strip()
    return reply, llm.chat_requests()[n:]


def import_card(tmp_path, card_file, characters):
    """`python bot.py character import CARD` into characters, with no model and no LLM."""
    return run_bot("character", "import", card_file, env={
        "BOT_CHARACTERS": characters, "BOT_DB": tmp_path / "cli.db", "EMBED_MODEL": "off",
        "LLM_BASE_URL": "http://127.0.0.1:9/v1"})


# characters.json errors #####################################################

def test_shipped_characters_parse():
    data = bot.character_parse((ROOT / "characters.json").read_text(encoding="utf-8"))
    assert data["default"] == "assistant"
    assert data["order"] == ["assistant", "neko", "knight"]
    assert data["cards"]["knight"]["memory"]["filter"]["手机"] == "传讯水晶"


@pytest.mark.parametrize("text, line, column", [
    ('{\n  "default": "assistant",\n  "characters": [\n    {"id": "a", "name": "A" "description": "d"}\n  ]\n}', 4, 29),
    ('{"characters": [{"id": "a",}]}', 1, 28),
    ('{\n "default": "小满",\n "characters": [\n  {"name": "小满", "description": 设定}\n ]\n}', 4, 33),
])
def test_json_syntax_error_gives_line_and_column(text, line, column):
    msg = parse_error(text)
    assert f"line {line} column {column}" in msg


def test_cli_run_with_broken_json_exits_1_with_one_error_line(env):
    chars = Path(env["BOT_CHARACTERS"])
    lines = chars.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2].replace('"characters": [', '"characters" [')  # line 3: missing colon
    chars.write_text("\n".join(lines), encoding="utf-8")
    proc = run_bot(env=env)
    err = assert_one_error_line(proc)
    assert "line 3 column" in err and "characters.json" in err
    assert "ready" not in proc.stdout


@pytest.mark.parametrize("field", ["id", "name", "description"])
def test_missing_field_is_named(field):
    msg = parse_error(cards_with(lambda d: d["characters"][2].pop(field)))
    assert f"characters[2].{field} is missing" in msg


@pytest.mark.parametrize("change, expected", [
    (lambda d: d["characters"][1].update(name=123), "characters[1].name must be text"),
    (lambda d: d["characters"][0].update(description=["小满"]), "characters[0].description must be text"),
    (lambda d: d["characters"][2].update(tags="骑士"), "characters[2].tags must be a list"),
    (lambda d: d["characters"][2]["memory"].update(filter=[["手机", "传讯水晶"]]), "characters[2].memory.filter must be an object"),
    (lambda d: d["characters"][0]["memory"].update(allow_ai="是"), "characters[0].memory.allow_ai must be true or false"),
    (lambda d: d["characters"][2]["memory"]["unknown"].append(42), "characters[2].memory.unknown[12] must be text"),
    (lambda d: d["characters"][2]["memory"].update(filtre={}), "did you mean filter"),
    (lambda d: d["characters"][2].update(character_book=[]), "characters[2].character_book must be an object"),
    (lambda d: d["characters"][2]["character_book"].update(entries={}), "characters[2].character_book.entries must be a list"),
    (lambda d: d["characters"][2]["character_book"]["entries"][3].update(keys="龙"),
     "characters[2].character_book.entries[3].keys must be a list of words"),
    (lambda d: d["characters"][1]["character_book"]["entries"][0].pop("content"),
     "characters[1].character_book.entries[0].content is missing"),
    (lambda d: d.update(default=["knight"]), "default [\"knight\"] is not the id of any character"),
])
def test_wrong_type_is_named(change, expected):
    assert expected in parse_error(cards_with(change))


@pytest.mark.parametrize("index, dup", [(2, "neko"), (1, "assistant")])
def test_duplicate_id(index, dup):
    msg = parse_error(cards_with(lambda d: d["characters"][index].update(id=dup)))
    assert f"characters[{index}].id '{dup}' is used twice" in msg


@pytest.mark.parametrize("default", ["dragon", "小咪", "Knight"])
def test_unknown_default(default):
    msg = parse_error(cards_with(lambda d: d.update(default=default)))
    assert f'default "{default}" is not the id of any character' in msg
    assert "assistant, neko, knight" in msg


def test_bad_id_and_empty_list():
    assert "may only use letters" in parse_error(cards_with(lambda d: d["characters"][0].update(id="小满")))
    assert "characters is empty" in parse_error({"characters": []})
    assert "\"characters\" list" in parse_error([1, 2])


# Hot reload ##################################################################

def test_hot_reload_uses_new_card_and_keeps_last_good_on_broken_json(runner, napcat, llm, env):
    path = Path(env["BOT_CHARACTERS"])
    reply, reqs = chat(napcat, llm, 11, "你好呀")
    assert reply == "echo:你好呀"
    assert "【角色】小满" in system_text(reqs[0])

    rewrite(path, json.dumps(cards_with(lambda d: d["characters"][0].update(
        name="满满", personality="说话时总爱提到重载标记甲。")), ensure_ascii=False))
    reply, reqs = chat(napcat, llm, 11, "你是谁")
    assert reply == "echo:你是谁"
    assert "【角色】满满" in system_text(reqs[0]) and "重载标记甲" in system_text(reqs[0])
    assert "【角色】小满" not in system_text(reqs[0])

    rewrite(path, path.read_text(encoding="utf-8")[:-40])  # cut off: broken JSON
    reply, reqs = chat(napcat, llm, 11, "还在吗")
    assert reply == "echo:还在吗"
    assert "【角色】满满" in system_text(reqs[0]) and "重载标记甲" in system_text(reqs[0])
    assert chat(napcat, llm, 11, "当前角色")[0] == "现在是满满（assistant）在和你聊天。"

    rewrite(path, json.dumps(CARDS, ensure_ascii=False))  # fixed again: picked up
    reply, reqs = chat(napcat, llm, 11, "再问一次")
    assert "【角色】小满" in system_text(reqs[0]) and "重载标记甲" not in system_text(reqs[0])


def test_hot_reload_updates_lore(runner, napcat, llm, env):
    path = Path(env["BOT_CHARACTERS"])
    chat(napcat, llm, 12, "切换角色 knight")

    def change(d):
        d["characters"][2]["character_book"]["entries"][3]["content"] = "新的传说：黑龙已被王都的法师封印在冰湖之下。"
    rewrite(path, json.dumps(cards_with(change), ensure_ascii=False))
    _, reqs = chat(napcat, llm, 12, "你见过黑龙吗？")
    assert "封印在冰湖之下" in context_text(reqs[0])
    assert "莫尔加斯盘踞" not in context_text(reqs[0])


# Switching through QQ ##########################################################

def test_the_new_characters_greeting_is_in_the_next_prompt_paired_with_the_switch(runner, napcat, llm):
    """After 切换角色 the greeting comes before any user turn of the new character; it stays in the next
    prompt as the answer to the switch command, and switching back doesn't pair one character's command
    with another's greeting."""
    assert chat(napcat, llm, 51, "你好")[0] == "echo:你好"
    greeting = chat(napcat, llm, 51, "切换角色 neko")[0]
    assert "小咪" in greeting
    _, reqs = chat(napcat, llm, 51, "你是谁")
    assert reqs[0]["json"]["messages"][1:] == [{"role": "user", "content": "切换角色 neko"},
                                               {"role": "assistant", "content": greeting},
                                               {"role": "user", "content": "你是谁"}]
    back = chat(napcat, llm, 51, "切换角色 assistant")[0]
    assert "小满" in back
    _, reqs = chat(napcat, llm, 51, "在吗")
    assert reqs[0]["json"]["messages"][1:] == [{"role": "user", "content": "你好"},
                                               {"role": "assistant", "content": "echo:你好"},
                                               {"role": "user", "content": "切换角色 assistant"},
                                               {"role": "assistant", "content": back},
                                               {"role": "user", "content": "在吗"}]


@pytest.mark.parametrize("command, cid", [
    ("切换角色 knight", "knight"), ("切换角色 艾德蒙", "knight"), ("换角色：小咪", "neko"),
    ("/character Knight", "knight"), ("切换角色小咪", "neko")])
def test_switch_replies_with_greeting_and_next_message_uses_card(runner, napcat, llm, command, cid):
    card = BY_ID[cid]
    reply, reqs = chat(napcat, llm, 31, command)
    assert reply == card["first_mes"]
    assert reqs == []  # a command, not an LLM call
    assert chat(napcat, llm, 31, "当前角色")[0] == f"现在是{card['name']}（{cid}）在和你聊天。"
    _, reqs = chat(napcat, llm, 31, "今天天气不错")
    assert f"【角色】{card['name']}" in system_text(reqs[0])
    assert runner.rows("SELECT character_id FROM sessions WHERE session = 'p:31'")[0]["character_id"] == cid


def test_character_list_and_unknown_name(runner, napcat, llm):
    listing = chat(napcat, llm, 32, "角色列表")[0]
    assert "1. 小满（assistant）  ← 当前" in listing
    assert "2. 小咪（neko）" in listing and "3. 艾德蒙（knight）" in listing
    chat(napcat, llm, 32, "切换角色 艾德蒙")
    listing = chat(napcat, llm, 32, "/characters")[0]
    assert "3. 艾德蒙（knight）  ← 当前" in listing and "← 当前" not in listing.split("3.")[0]
    reply = chat(napcat, llm, 32, "切换角色 巫师")[0]
    assert "没有叫“巫师”的角色" in reply
    assert chat(napcat, llm, 32, "当前角色")[0] == "现在是艾德蒙（knight）在和你聊天。"


def test_each_chat_keeps_its_own_character(runner, napcat, llm):
    group = dict(group_id=500, at_bot=True)
    assert chat(napcat, llm, 7, "切换角色 neko", role="admin", **group)[0] == BY_ID["neko"]["first_mes"]
    assert chat(napcat, llm, 7, "当前角色")[0] == "现在是小满（assistant）在和你聊天。"
    assert chat(napcat, llm, 7, "切换角色 knight")[0] == BY_ID["knight"]["first_mes"]
    assert chat(napcat, llm, 7, "当前角色", **group)[0] == "现在是小咪（neko）在和你聊天。"
    assert chat(napcat, llm, 8, "当前角色", **group)[0] == "现在是小咪（neko）在和你聊天。"  # the group's choice
    assert chat(napcat, llm, 8, "当前角色")[0] == "现在是小满（assistant）在和你聊天。"  # 8's private chat
    assert chat(napcat, llm, 7, "当前角色", group_id=501, at_bot=True)[0] == "现在是小满（assistant）在和你聊天。"
    _, reqs = chat(napcat, llm, 7, "晚上吃什么", **group)
    assert "【角色】小咪" in system_text(reqs[0])
    _, reqs = chat(napcat, llm, 7, "晚上吃什么")
    assert "【角色】艾德蒙" in system_text(reqs[0])
    # a group message that starts with a character's name addresses the bot too
    assert chat(napcat, llm, 7, "小咪，当前角色", group_id=500)[0] == "现在是小咪（neko）在和你聊天。"


def test_group_default_character_by_superuser_only(runner, napcat, llm):
    assert chat(napcat, llm, 42, "/group_character 600 neko")[0] == "群 600 的默认角色设为 小咪。"
    assert chat(napcat, llm, 9, "当前角色", group_id=600, at_bot=True)[0] == "现在是小咪（neko）在和你聊天。"
    _, reqs = chat(napcat, llm, 9, "你在干嘛", group_id=600, at_bot=True)
    assert "【角色】小咪" in system_text(reqs[0])

    assert chat(napcat, llm, 9, "/group_character 601 knight")[0] == "这个命令只有管理员能用。"
    assert chat(napcat, llm, 9, "/group_character 600 knight", group_id=600, at_bot=True)[0] == "这个命令只有管理员能用。"
    assert chat(napcat, llm, 9, "当前角色", group_id=601, at_bot=True)[0] == "现在是小满（assistant）在和你聊天。"
    assert chat(napcat, llm, 9, "当前角色", group_id=600, at_bot=True)[0] == "现在是小咪（neko）在和你聊天。"
    assert runner.rows("SELECT default_character FROM sessions WHERE session = 'g:601'") in ([], [{"default_character": None}])

    assert chat(napcat, llm, 42, "/group_character 600 巫师")[0] == "用法：/group_character 群号 角色id"
    assert chat(napcat, llm, 42, "/group_character 艾德蒙")[0] == "用法：/group_character 群号 角色id"
    # by name works too, and a group's own switch wins over its default
    assert chat(napcat, llm, 42, "/group_character 602 艾德蒙")[0] == "群 602 的默认角色设为 艾德蒙。"
    assert chat(napcat, llm, 9, "当前角色", group_id=602, at_bot=True)[0] == "现在是艾德蒙（knight）在和你聊天。"
    chat(napcat, llm, 9, "切换角色 neko", group_id=602, at_bot=True, role="owner")
    assert chat(napcat, llm, 9, "当前角色", group_id=602, at_bot=True)[0] == "现在是小咪（neko）在和你聊天。"


# Boundaries ######################################################################

def test_user_fact_reaches_every_character(runner, napcat, llm):
    assert chat(napcat, llm, 21, "记住，我住在北京")[0].startswith("好的，记住了：“我住在北京”")
    mem = runner.rows("SELECT type, character_id, text FROM memories WHERE user_id = '21'")
    assert mem == [{"type": "user_fact", "character_id": None, "text": "我住在北京"}]
    for cid in ("assistant", "neko", "knight"):
        if cid != "assistant":
            chat(napcat, llm, 21, f"切换角色 {cid}")
        _, reqs = chat(napcat, llm, 21, "我住在哪里？")
        assert f"【角色】{BY_ID[cid]['name']}" in system_text(reqs[0])
        assert "用户说过：“我住在北京”" in context_text(reqs[0]), cid


def test_experience_is_only_seen_by_its_character(runner, napcat, llm):
    chat(napcat, llm, 22, "切换角色 knight")
    reply = chat(napcat, llm, 22, "记住，你答应给我讲龙的故事")[0]
    assert "你答应给我讲龙的故事" in reply
    mem = runner.rows("SELECT type, character_id, text FROM memories WHERE user_id = '22'")
    assert mem == [{"type": "experience", "character_id": "knight", "text": "你答应给我讲龙的故事"}]

    _, reqs = chat(napcat, llm, 22, "龙的故事什么时候讲？")
    assert "你答应给我讲龙的故事" in context_text(reqs[0])

    chat(napcat, llm, 22, "切换角色 neko")
    _, reqs = chat(napcat, llm, 22, "龙的故事什么时候讲？")
    assert "【角色】小咪" in system_text(reqs[0])
    assert "答应给我讲龙的故事" not in all_text(reqs[0])
    assert "龙的故事" not in chat(napcat, llm, 22, "你记得我什么")[0]

    chat(napcat, llm, 22, "切换角色 knight")
    assert "龙的故事" in chat(napcat, llm, 22, "你记得我什么")[0]


def test_summary_of_one_character_is_not_in_anothers_prompt(runner, napcat, llm):
    chat(napcat, llm, 23, "切换角色 knight")
    chat(napcat, llm, 23, "我们明天出发吗")
    ids = [r["id"] for r in runner.rows("SELECT id FROM messages WHERE session = 'p:23' AND character_id = 'knight' ORDER BY id")]
    summary = "此前，我答应旅人明早去白鸦城的铁匠铺取回晨曦之誓，再一同出发。"
    runner.db(lambda c: bot.summary_store(c, "p:23", "knight", [{"id": ids[0]}, {"id": ids[-1]}], summary, "llm",
                                          runner.app.vec(summary)))

    _, reqs = chat(napcat, llm, 23, "铁匠铺在哪里？")
    assert summary in context_text(reqs[0])

    chat(napcat, llm, 23, "切换角色 neko")
    _, reqs = chat(napcat, llm, 23, "铁匠铺在哪里？我们去取回晨曦之誓吧")
    assert "【角色】小咪" in system_text(reqs[0])
    assert "答应旅人明早去白鸦城" not in all_text(reqs[0])
    assert "【此前】" not in context_text(reqs[0])


def test_another_characters_turns_never_reach_the_prompt(runner, napcat, llm):
    """'你上次扮演管家时说了什么？': the knight gets nothing of what was said to the cat."""
    chat(napcat, llm, 24, "切换角色 neko")
    llm.script = ["*小咪挺起胸脯* 本管家宣布：今晚的晚饭是三文鱼罐头喵！"]
    assert "三文鱼罐头" in chat(napcat, llm, 24, "小咪，你来扮演管家吧，晚饭吃什么？")[0]
    llm.summary_script = ["此前，小咪扮演管家，宣布今晚的晚饭是三文鱼罐头。"]
    chat(napcat, llm, 24, "切换角色 knight")
    assert wait_for(lambda: runner.rows("SELECT id FROM summaries WHERE session = 'p:24' AND character_id = 'neko'"))

    for question in ("你上次扮演管家时说了什么？", "晚饭是什么？三文鱼罐头吗？"):
        _, reqs = chat(napcat, llm, 24, question)
        text = all_text(reqs[0])
        assert "【角色】艾德蒙" in text
        assert "本管家宣布" not in text and "你来扮演管家吧" not in text
        assert "小咪扮演管家" not in text
        assert "听到开门声" not in text  # neko's greeting

    chat(napcat, llm, 24, "切换角色 neko")
    _, reqs = chat(napcat, llm, 24, "你上次扮演管家时说了什么？")
    text = all_text(reqs[0])
    assert "本管家宣布" in text and "小咪扮演管家" in context_text(reqs[0])


def test_lore_only_for_its_character_and_only_when_keys_are_recent(runner, napcat, llm):
    dragon, fish = "莫尔加斯盘踞在灰烬山脉", "烤小鱼干"
    chat(napcat, llm, 25, "切换角色 knight")
    _, reqs = chat(napcat, llm, 25, "今天过得怎么样")
    assert dragon not in all_text(reqs[0])
    assert "洛瑟恩王国位于银溪河谷" in context_text(reqs[0])  # 王国 is in the knight's greeting
    _, reqs = chat(napcat, llm, 25, "你见过黑龙吗？")
    assert dragon in context_text(reqs[0])
    _, reqs = chat(napcat, llm, 25, "小鱼干好吃吗")
    assert fish not in all_text(reqs[0])  # the cat's book is not the knight's
    assert dragon in context_text(reqs[0])  # 龙 is still in the recent turns
    chat(napcat, llm, 25, "明天去集市")
    _, reqs = chat(napcat, llm, 25, "路上小心")
    assert dragon not in all_text(reqs[0])  # 龙 has left the recent turns

    chat(napcat, llm, 26, "切换角色 neko")
    _, reqs = chat(napcat, llm, 26, "你见过黑龙吗？")
    assert dragon not in all_text(reqs[0])
    _, reqs = chat(napcat, llm, 26, "小鱼干好吃吗")
    assert fish in context_text(reqs[0])
    assert "老小区六楼" not in all_text(reqs[0])  # another entry of its own book, keys not said

    lore = runner.rows("SELECT character_id, count(*) AS n FROM lore GROUP BY character_id ORDER BY 1")
    assert lore == [{"character_id": "assistant", "n": 1}, {"character_id": "knight", "n": 4}, {"character_id": "neko", "n": 3}]


# Filters ##########################################################################

@pytest.mark.parametrize("fact, question, shown, stored", [
    ("我新买了手机", "我新买的手机好用吗", "“我新买了传讯水晶”", "“我新买了手机”"),
    ("我的钱包丢在地铁上了", "我的钱包找到了吗", "“我的钱袋丢在地下马道上了”", "“我的钱包丢在地铁上了”"),
])
def test_knight_sees_filtered_words_but_memory_keeps_the_original(runner, napcat, llm, fact, question, shown, stored):
    chat(napcat, llm, 27, "切换角色 knight")
    chat(napcat, llm, 27, "记住，" + fact)
    llm.script = ["*艾德蒙若有所思地点点头* 旅人所言之物，我当铭记。"]
    reply, reqs = chat(napcat, llm, 27, question)
    assert reply == "*艾德蒙若有所思地点点头* 旅人所言之物，我当铭记。"
    assert shown in context_text(reqs[0])
    assert stored not in context_text(reqs[0])
    mem = runner.rows("SELECT text FROM memories WHERE user_id = '27'")
    assert mem == [{"text": fact}]

    chat(napcat, llm, 27, "切换角色 assistant")  # other characters see the words as they are
    _, reqs = chat(napcat, llm, 27, question)
    assert stored in context_text(reqs[0])


# OOC check ###########################################################################

STRICTER = "注意：你上一次的回复出戏了"


def test_ooc_reply_is_asked_again_with_a_stricter_note(runner, napcat, llm):
    chat(napcat, llm, 28, "切换角色 knight")
    good = "*艾德蒙按剑而立* 旅人，此事容我细想。"
    llm.script = ["作为一个AI，我无法真正挥剑。", good]
    reply, reqs = chat(napcat, llm, 28, "你会用剑吗")
    assert reply == good
    assert len(reqs) == 2
    assert STRICTER not in all_text(reqs[0])
    first, again = reqs[0]["json"]["messages"], reqs[1]["json"]["messages"]
    note = system_part(again, STRICTER)  # the end of the one system message
    assert note and "艾德蒙" in note and again[0]["content"].endswith(note)
    assert again[0]["content"].startswith(first[0]["content"]) and again[1:] == first[1:]
    assert reqs[1]["json"]["messages"][-1] == reqs[0]["json"]["messages"][-1] == {"role": "user", "content": "你会用剑吗"}
    stored = runner.rows("SELECT text FROM messages WHERE session = 'p:28' AND role = 'assistant' ORDER BY id DESC LIMIT 1")
    assert stored == [{"text": good}]


@pytest.mark.parametrize("cid, first, second", [
    ("knight", "作为一个AI，我无法回答。", "我是一个语言模型，只是在扮演骑士。"),
    ("knight", "As an AI, I cannot hold a sword.", "小咪说过，骑士都怕猫。"),
    ("neko", "作为AI，我没有真正的尾巴。", "主人要不要一起学Python喵？"),
])
def test_ooc_twice_sends_a_fallback_reply(runner, napcat, llm, cid, first, second):
    chat(napcat, llm, 29, f"切换角色 {cid}")
    llm.script = [first, second]
    reply, reqs = chat(napcat, llm, 29, "你是谁？")
    assert len(reqs) == 2 and STRICTER in all_text(reqs[1])
    assert reply in BY_ID[cid]["memory"]["fallback_replies"]
    assert first not in reply and second not in reply


def test_assistant_may_say_it_is_an_ai(runner, napcat, llm):
    llm.script = ["作为一个AI助手，我建议你先看官方文档。"]
    reply, reqs = chat(napcat, llm, 30, "怎么学Python？")
    assert reply == "作为一个AI助手，我建议你先看官方文档。"
    assert len(reqs) == 1


@pytest.mark.parametrize("cid, reply, why", [
    ("assistant", "作为一个AI助手，我建议你先查文档。", None),
    ("assistant", "我是一个语言模型，可能会出错。", None),
    ("knight", "*艾德蒙拔出晨曦之誓* 为了国王与王国！", None),
    ("knight", "作为一个人工智能，我无法挥剑。", "AI self-reference"),
    ("knight", "I'm an AI and cannot ride.", "AI self-reference"),
    ("knight", "小咪说她饿了，旅人可有干粮？", "other character: 小咪"),
    ("knight", "旅人，你说的互联网是何物？", "unknown term: 互联网"),
    ("knight", "这面传讯水晶里竟有人影！", None),
    ("knight", "你的手机会发光？", "unknown term: 手机"),
    ("neko", "主人在玩python吗喵？", "unknown term: Python"),
    ("neko", "艾德蒙爵士是谁喵？", "other character: 艾德蒙"),
    ("neko", "小咪是只可爱的猫喵～", None),
])
def test_character_ooc_rules(cid, reply, why):
    result = bot.character_ooc(BY_ID[cid], reply, BY_ID)
    if why is None:
        assert result is None
    else:
        assert result is not None and result.startswith(why), result


# Import ###############################################################################

def png_chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def make_png(text_chunks=()):
    """A valid 1x1 greyscale PNG with tEXt chunks (keyword, JSON object) holding base64 JSON."""
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    out += png_chunk(b"IDAT", zlib.compress(b"\x00\x80"))
    for key, obj in text_chunks:
        out += png_chunk(b"tEXt", key.encode() + b"\0" + base64.b64encode(json.dumps(obj, ensure_ascii=False).encode()))
    return out + png_chunk(b"IEND", b"")


def v2_card(name):
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": name, "description": f"{name}是白鸦城的女巫，住在钟楼顶上。", "personality": "冷静、好奇",
        "scenario": "{{user}}在钟楼下遇见了{{char}}。", "first_mes": "*女巫从钟楼上探出头* 你找我？",
        "mes_example": "", "creator_notes": "测试卡", "system_prompt": "", "post_history_instructions": "",
        "alternate_greetings": ["又见面了。"], "tags": ["fantasy", "女巫"], "creator": "tester",
        "character_version": "1.0", "x_favourite_colour": "蓝色",
        "character_book": {"name": "钟楼", "extensions": {}, "entries": [
            {"keys": ["钟楼", "钟"], "content": "钟楼建于三百年前，顶层是女巫的药草房。", "extensions": {},
             "enabled": True, "insertion_order": 1, "comment": "钟楼"},
            {"keys": ["猫头鹰"], "content": "女巫养了一只叫灰羽的猫头鹰。", "extensions": {}, "enabled": True,
             "insertion_order": 2}]},
        "extensions": {"x": 1, "depth_prompt": {"depth": 4, "prompt": ""}}}}


def v3_card(name):
    card = v2_card(name)
    card["spec"], card["spec_version"] = "chara_card_v3", "3.0"
    card["data"].update(nickname="小女巫", group_only_greetings=[], creation_date=1700000000,
                        assets=[{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}])
    card["data"]["character_book"]["entries"][0]["use_regex"] = False
    return card


@pytest.fixture
def chars_copy(tmp_path):
    path = tmp_path / "characters.json"
    path.write_text((ROOT / "characters.json").read_text(encoding="utf-8"), encoding="utf-8")
    return path


@pytest.mark.parametrize("kind, name, new_id, spec", [
    ("json", "Sherry Blackwood", "sherry-blackwood", "chara_card_v2 2.0"),
    ("png-ccv3", "Knight", "knight-2", "chara_card_v3 3.0"),
    ("png-chara", "雪莉", "card", "chara_card_v2 2.0"),
    ("png-both", "Aria", "aria", "chara_card_v3 3.0"),
])
def test_import_card(tmp_path, chars_copy, kind, name, new_id, spec):
    source = v3_card(name) if "ccv3" in kind or kind == "png-both" else v2_card(name)
    if kind == "json":
        card_file = tmp_path / "card.json"
        card_file.write_text(json.dumps(source, ensure_ascii=False), encoding="utf-8")
    else:
        chunks = {"png-ccv3": [("ccv3", source)], "png-chara": [("chara", source)],
                  "png-both": [("chara", v2_card("Old" + name)), ("ccv3", source)]}[kind]
        card_file = tmp_path / "card.png"
        card_file.write_bytes(make_png(chunks))
    proc = import_card(tmp_path, card_file, chars_copy)
    assert proc.returncode == 0, proc.stderr
    assert f"as id {new_id} (2 lore entries)" in proc.stdout

    data = json.loads(chars_copy.read_text(encoding="utf-8"))
    parsed = bot.character_parse(chars_copy.read_text(encoding="utf-8"))
    assert parsed["order"] == ["assistant", "neko", "knight", new_id]
    assert data["characters"][:3] == CARDS["characters"]  # the others are untouched
    card = data["characters"][-1]
    assert card["id"] == new_id and card["name"] == name
    assert card["first_mes"] == source["data"]["first_mes"]
    assert card["tags"] == ["fantasy", "女巫"] and card["alternate_greetings"] == ["又见面了。"]
    assert card["x_favourite_colour"] == "蓝色"  # unknown fields are kept
    assert card["extensions"]["x"] == 1 and card["extensions"]["depth_prompt"]["depth"] == 4
    assert card["extensions"]["mnemo_imported_from"] == spec
    entries = card["character_book"]["entries"]
    assert [e["keys"] for e in entries] == [["钟楼", "钟"], ["猫头鹰"]]
    assert entries[0]["content"] == "钟楼建于三百年前，顶层是女巫的药草房。"
    assert entries[0]["comment"] == "钟楼" and entries[0]["insertion_order"] == 1
    assert card["character_book"]["name"] == "钟楼"
    if "ccv3" in kind or kind == "png-both":
        assert card["nickname"] == "小女巫" and card["assets"][0]["uri"] == "ccdefault:"


def test_import_twice_gets_fresh_ids(tmp_path, chars_copy):
    card_file = tmp_path / "card.json"
    card_file.write_text(json.dumps(v2_card("Sherry"), ensure_ascii=False), encoding="utf-8")
    for _ in range(2):
        assert import_card(tmp_path, card_file, chars_copy).returncode == 0
    order = bot.character_parse(chars_copy.read_text(encoding="utf-8"))["order"]
    assert order == ["assistant", "neko", "knight", "sherry", "sherry-2"]


@pytest.mark.parametrize("content, expected", [
    (make_png(), "has no character card in it"),
    (make_png([("Comment", {"name": "不是角色卡"})]), "has no character card in it"),
    (b"\x89PNG\r\n\x1a\n" + png_chunk(b"tEXt", b"chara\0" + base64.b64encode(b"{\"name\": ")) + png_chunk(b"IEND", b""),
     "is not a card"),
])
def test_import_png_without_a_card_is_an_error(tmp_path, chars_copy, content, expected):
    card_file = tmp_path / "picture.png"
    card_file.write_bytes(content)
    before = chars_copy.read_bytes()
    proc = import_card(tmp_path, card_file, chars_copy)
    line = assert_one_error_line(proc)
    assert "picture.png" in line and expected in line
    assert chars_copy.read_bytes() == before


def text_chunk(kind, keyword, payload, compressed=False):
    """A tEXt, zTXt or iTXt chunk holding payload (bytes) under keyword, laid out as the PNG spec says."""
    key = keyword.encode("latin-1") + b"\0"
    if kind == b"tEXt":
        return png_chunk(kind, key + payload)
    if kind == b"zTXt":
        return png_chunk(kind, key + b"\0" + zlib.compress(payload))
    flag = b"\1" if compressed else b"\0"
    return png_chunk(kind, key + flag + b"\0" + b"zh\0" + "角色卡".encode() + b"\0"
                     + (zlib.compress(payload) if compressed else payload))


def png_with(*chunks):
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + png_chunk(b"IDAT", zlib.compress(b"\x00\x80")) + b"".join(chunks) + png_chunk(b"IEND", b""))


B64_CARD = base64.b64encode(json.dumps(v2_card("Iris"), ensure_ascii=False).encode())


@pytest.mark.parametrize("chunk", [text_chunk(b"zTXt", "chara", B64_CARD), text_chunk(b"iTXt", "chara", B64_CARD),
                                   text_chunk(b"iTXt", "ccv3", B64_CARD, compressed=True)],
                         ids=["zTXt", "iTXt", "iTXt-compressed"])
def test_import_card_from_compressed_and_international_text_chunks(tmp_path, chars_copy, chunk):
    card_file = tmp_path / "card.png"
    card_file.write_bytes(png_with(text_chunk(b"zTXt", "Comment", b"\xff broken but not a card"), chunk))
    proc = import_card(tmp_path, card_file, chars_copy)
    assert proc.returncode == 0 and "imported Iris as id iris (2 lore entries)" in proc.stdout, proc.stderr


def _bad_crc(chunk):
    return chunk[:-4] + bytes([chunk[-4] ^ 0xFF]) + chunk[-3:]


GOOD_PNG = png_with(text_chunk(b"tEXt", "chara", B64_CARD))


@pytest.mark.parametrize("content, expected", [
    (GOOD_PNG[:len(GOOD_PNG) - 40], "is cut short"),  # inside the card chunk
    (GOOD_PNG[:len(GOOD_PNG) - 12], "is cut short"),  # no IEND
    (GOOD_PNG[:30], "is cut short"),  # inside IHDR
    (png_with(png_chunk(b"zTXt", b"chara\0\0" + b"this is not zlib data")), "'chara' zTXt chunk is damaged"),
    (png_with(png_chunk(b"iTXt", b"chara\0\0\0" + B64_CARD)), "'chara' iTXt chunk is damaged (wrong iTXt layout)"),
    (png_with(png_chunk(b"iTXt", b"chara\0\1\0\0\0" + b"not zlib either")), "'chara' iTXt chunk is damaged"),
    (png_with(png_chunk(b"iTXt", b"ccv3\0\7\0\0\0" + B64_CARD)), "'ccv3' iTXt chunk is damaged (wrong iTXt layout)"),
    (png_with(_bad_crc(text_chunk(b"tEXt", "chara", B64_CARD))), "chunk is damaged (CRC mismatch)"),
    (png_with(text_chunk(b"tEXt", "chara", "这不是 base64！".encode())), "the card chunk is not base64"),
    (png_with(text_chunk(b"tEXt", "chara", base64.b64encode(b"[1, 2]"))), "holds JSON list, not an object"),
    (b"[1, 2]", "holds JSON list, not an object"),
    (json.dumps(v2_card("Iris")).encode("utf-16"), "is not a card"),
], ids=["cut-in-card", "no-IEND", "cut-in-IHDR", "zTXt-bad-zlib", "iTXt-no-nulls", "iTXt-bad-zlib", "iTXt-bad-flag",
        "bad-crc", "not-base64", "png-json-list", "json-list", "utf16-json"])
def test_import_damaged_card_is_one_error_and_changes_nothing(tmp_path, chars_copy, content, expected):
    card_file = tmp_path / "picture.png"
    card_file.write_bytes(content)
    before = chars_copy.read_bytes()
    line = assert_one_error_line(import_card(tmp_path, card_file, chars_copy))
    assert "picture.png" in line and expected in line
    assert chars_copy.read_bytes() == before
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("make, expected", [
    (lambda p: None, "no card file at"),
    (lambda p: p.mkdir(), "is a folder, not a card file"),
], ids=["missing", "folder"])
def test_import_of_a_card_file_it_cannot_read(tmp_path, chars_copy, make, expected):
    card_file = tmp_path / "card.png"
    make(card_file)
    before = chars_copy.read_bytes()
    assert expected in assert_one_error_line(import_card(tmp_path, card_file, chars_copy))
    assert chars_copy.read_bytes() == before


def test_import_into_a_broken_characters_json_changes_nothing(tmp_path, chars_copy):
    card_file = tmp_path / "card.png"
    card_file.write_bytes(GOOD_PNG)
    chars_copy.write_text(chars_copy.read_text(encoding="utf-8")[:-30], encoding="utf-8")
    before = chars_copy.read_bytes()
    line = assert_one_error_line(import_card(tmp_path, card_file, chars_copy))
    assert "characters.json line" in line
    assert chars_copy.read_bytes() == before
    missing = tmp_path / "gone.json"
    assert "no characters file at" in assert_one_error_line(import_card(tmp_path, card_file, missing))
