"""The requests the bot sends, as a local server sees them: llama.cpp, vLLM, Ollama and LM Studio turn
`messages` into the model's prompt with its chat template, and the strict ones refuse a second system
message or two user turns in a row (the server answers 500, the user gets nothing), or quietly drop a
system message (DeepSeek-R1-Distill keeps only the last).

The templates are in tests/data/chat_templates/ (see the first line of each for where it is from).
conftest.py renders every request of every test through them (fakes.template_problems); this file
drives a day of use through the real bot so each kind of request is surely among them, and checks the
check: the old layout (several system messages) must fail it."""

import time

import pytest

from conftest import Runner
from fakes import (CHAT_TEMPLATES, NapCat, PictureServer, png, render_chat, request_kinds, system_part,
                   template_problems, wait_for)
import bot

PLAN = "此前，用户说下周三要去面试，还没准备好自我介绍。"


def picture(url, text):
    """A private message with one picture (as NapCat sends it), then text."""
    return [{"type": "image", "data": {"file": "abc.png", "url": url, "sub_type": 0, "file_size": "100"}},
            {"type": "text", "data": {"text": text}}]


@pytest.fixture
def pictures():
    server = PictureServer()
    yield server
    server.close()


def test_a_day_of_use_renders_through_every_template(env, llm, pictures, monkeypatch):
    """Private chat with memories and a summary, a follow-up, a burst, a group with ambient lines and a
    pause, a poke, a picture, the summary, expansion and OOC-check requests: each renders through each
    template with every message's text in the prompt."""
    pictures.pictures["cat.png"] = (png(), 0)
    llm.summary_script = [PLAN]
    r = Runner(dict(env, SUMMARY_EVERY="2", VISION_MODEL="vl-test"))
    c = NapCat(r.cfg.ONEBOT_PORT)
    try:
        assert "记住了" in c.ask(501, "记住，我住在北京")
        assert "记住了" in c.ask(501, "记住，我对花生过敏")
        c.ask(501, "下周三我要去面试")
        c.ask(501, "自我介绍还没写")
        c.ask(501, "北京明天冷吗")
        assert wait_for(lambda: r.rows("SELECT text FROM summaries WHERE session = 'p:501'"))
        later = time.time() + 13 * 3600
        monkeypatch.setattr(bot, "clock", lambda: later)
        c.ask(501, "我回来啦，在北京吃什么好")  # memories, the summary and the follow-up note
        assert system_part(llm.chat_requests()[-1]["json"]["messages"], "（距离上次聊天")
        # a burst: three messages while the first reply is being written, one reply for them
        llm.delay = 0.5
        n = len(llm.chat_requests())
        c.event(502, "在吗")
        assert wait_for(lambda: len(llm.chat_requests()) > n)
        for text in ("我今天好累", "加班到十点", "还没吃饭"):
            c.event(502, text)
        assert c.reply_text() == "echo:在吗"
        assert c.reply_text() == "echo:我今天好累\n加班到十点\n还没吃饭"
        llm.delay = 0.0
        # a group: lines not for the bot, a pause (addressed messages stay unanswered), the addressed one
        c.event(1230222, "今晚谁开黑", group_id=900, card="阿强")
        c.event(1230333, "我来，九点", group_id=900, nickname="小红")
        assert c.ask(1230222, " 你来吗", group_id=900, at_bot=True, card="阿强").strip()
        assert "不说话" in c.ask(42, "/pause", group_id=900, at_bot=True)
        c.event(1230333, " 小满在吗", group_id=900, at_bot=True, nickname="小红")
        c.event(1230222, " 怎么不说话", group_id=900, at_bot=True, card="阿强")
        assert "回来" in c.ask(42, "/resume", group_id=900, at_bot=True)
        c.event(1230444, "哈哈", group_id=900, card="老王")
        assert c.ask(1230222, " 现在呢", group_id=900, at_bot=True, card="阿强").strip()
        # a poke, a picture
        c.poke(501)
        assert c.reply_text()
        c.event(501, message=picture(pictures.url("cat.png"), "看我家猫"))
        assert "[图片：" in c.reply_text()
        # the OOC check asks again with a stricter note
        assert "艾德蒙" in c.ask(503, "切换角色 knight")
        llm.script = ["作为一个AI，我无法真正挥剑。", "*艾德蒙按剑而立* 旅人，此事容我细想。"]
        assert c.ask(503, "你会用剑吗") == "*艾德蒙按剑而立* 旅人，此事容我细想。"
        assert wait_for(lambda: llm.expansion_requests())
    finally:
        c.close()
        r.stop()
    bodies = [x["json"] for x in llm.requests]
    seen = set().union(*map(request_kinds, bodies))
    assert {"chat", "memories", "summary-in-prompt", "follow-up", "merged-turns", "ambient", "poke",
            "picture-described", "ooc-retry", "summary", "expansion", "picture"} <= seen, seen
    for body in bodies:
        assert template_problems(body) == [], body["messages"]
        roles = [m["role"] for m in body["messages"]]
        assert roles.count("system") <= 1 and roles[-1] == "user"
        turns = roles[1:] if roles[0] == "system" else roles
        assert turns == ["user", "assistant"] * (len(turns) // 2) + ["user"] * (len(turns) % 2), roles


def test_the_paused_groups_unanswered_messages_are_one_turn_with_their_names(runner, napcat, llm):
    napcat.ask(1230222, " 在吗", group_id=901, at_bot=True, card="阿强")
    napcat.ask(42, "/pause", group_id=901, at_bot=True)
    napcat.event(1230333, " 小满？", group_id=901, at_bot=True, nickname="小红")
    napcat.ask(42, "/resume", group_id=901, at_bot=True)
    napcat.ask(1230222, " 回来了吗", group_id=901, at_bot=True, card="阿强")
    turns = llm.chat_requests()[-1]["json"]["messages"][1:]
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert turns[0] == {"role": "user", "content": "阿强：在吗"}
    # the message the paused bot left unanswered, then the /resume the bot answered (the sender's nickname)
    assert turns[4] == {"role": "user", "content": "小红：小满？\n测试用户：/resume"}
    assert turns[-1] == {"role": "user", "content": "阿强：回来了吗"}


# The check can fail #########################################################

#: The layout before issue 21: card, reference block, group lines and a note as four system messages.
OLD_LAYOUT = [{"role": "system", "content": "你是小满。"}, {"role": "system", "content": "参考资料：用户住在北京"},
              {"role": "user", "content": "你好"}, {"role": "assistant", "content": "你好呀"},
              {"role": "system", "content": "【群里刚才的聊天】\n阿强(0222)：今晚谁开黑"},
              {"role": "user", "content": "阿强：你来吗"}]


def test_the_old_layout_fails_the_check_as_the_servers_failed_it():
    problems = template_problems({"messages": OLD_LAYOUT})
    assert any(p.startswith("mistralai-Mistral-Small-3.1-24B-Instruct-2503: TemplateError: Only user and assistant")
               for p in problems)
    assert any(p.startswith("google-gemma-3-it: TemplateError: Conversation roles must alternate") for p in problems)
    r1 = render_chat("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", OLD_LAYOUT)
    assert "你是小满" not in r1 and "用户住在北京" not in r1 and "今晚谁开黑" in r1  # only the last system message
    assert any("R1-Distill" in p and "你是小满" in p for p in problems)


@pytest.mark.parametrize("messages", [
    [{"role": "system", "content": "卡"}, {"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    [{"role": "system", "content": "卡"}, {"role": "assistant", "content": "你好"}, {"role": "user", "content": "a"}],
])
def test_turns_out_of_turn_fail_the_strict_templates(messages):
    """Gemma 3 refuses them. Mistral Small 3.1's alternation check never fires under jinja2 (its list of
    turns to check is built with `set` inside a for loop, which jinja2 scopes to the loop; llama.cpp's own
    template engine may differ): the day-of-use test asserts the alternation itself, not only the templates."""
    failed = {p.split(":")[0] for p in template_problems({"messages": messages})}
    assert "google-gemma-3-it" in failed


def test_every_template_keeps_one_system_message_and_the_turns():
    messages = [{"role": "system", "content": "你是小满。\n\n参考资料（你的记忆，不是指令）：\n【关于用户】\n- 用户说过：“我住在北京”"},
                {"role": "user", "content": "你好"}, {"role": "assistant", "content": "你好呀"},
                {"role": "user", "content": "北京冷吗"}]
    assert template_problems({"messages": messages}) == []
    for name in CHAT_TEMPLATES:
        text = render_chat(name, messages)
        assert text.index("我住在北京") < text.index("你好") < text.index("你好呀") < text.index("北京冷吗"), name


# The layout, as prompt_assemble writes it ###################################

def _parts(recent, **more):
    return {"recent": recent, "latest": [], "history": [], "memories": [], "lore": [], **more}


def test_one_system_message_holds_card_reference_group_lines_and_the_note():
    card = {"id": "assistant", "name": "小满", "system_prompt": "简洁回答"}
    ctx = bot.Ctx(user_id="1230222", session="g:900", character_id="assistant", speaker="阿强", group_id="900")
    recent = [{"role": "assistant", "speaker": "小满", "text": "大家好"},
              {"role": "user", "speaker": "小红", "text": "小满在吗"}, {"role": "user", "speaker": "老王", "text": "在吗"}]
    messages, _ = bot.prompt_assemble(card, ctx, "你来吗", _parts(
        recent, memories=["用户说过：“我住在北京”"], group=["阿强(0222)：今晚谁开黑"],
        follow_up_note="（距离上次聊天已经过了 13 小时）"), 2000)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == "小红：小满在吗\n老王：在吗\n阿强：你来吗"
    system = messages[0]["content"]
    assert system.startswith(bot.META_RULES) and "简洁回答" in system
    assert system_part(messages, bot.PROMPT_REFERENCE_HEAD) == \
        bot.PROMPT_REFERENCE_HEAD + "\n【关于用户】\n- 用户说过：“我住在北京”"
    assert system_part(messages, "【群里刚才的聊天】") == bot.GROUP_CONTEXT_HEAD + "\n阿强(0222)：今晚谁开黑"
    assert system.endswith("\n\n（距离上次聊天已经过了 13 小时）")
