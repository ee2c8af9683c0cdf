"""What each LLM provider answers when something is wrong, and what the bot does with it (issue 21).

The error bodies are the ones the providers document (or, where a doc shows none, the one their API is
seen to send in its users' bug reports); the fake server (fakes.FakeLLM) sends them as they come:

| provider / server            | answer                                              | the bot                      |
|------------------------------|-----------------------------------------------------|------------------------------|
| Zhipu GLM                    | 400 error.code "1301" (+ contentFilter)            | refused: in-character, no retry |
| DashScope (Qwen), compatible | 400 error.code "data_inspection_failed"             | refused                      |
| DeepSeek                     | 400 error.message "Content Exists Risk"             | refused                      |
| Moonshot (Kimi)              | 400 error.type "content_filter"                     | refused                      |
| Azure OpenAI                 | 400 error.code "content_filter"                     | refused                      |
| OpenAI / Zhipu, 200          | finish_reason "content_filter" / "sensitive"        | refused                      |
| DeepSeek                     | 402 "Insufficient Balance"                          | Fix line + superusers, hourly |
| OpenAI / Zhipu / DashScope   | 429 insufficient_quota / 429 1113 / 400 Arrearage   | the same, no retry           |
| Ollama / vLLM / OpenAI / DS  | 404 / 400 model not found, does not exist           | Fix: LLM_MODEL               |
| llama-server / vLLM / OpenAI | 400 context size / maximum context length           | half the prompt, once        |
| OpenAI reasoning models      | 400 unsupported_parameter max_tokens                | max_completion_tokens, kept  |
| llama-server --jinja / vLLM  | 500 / 400 the chat template's exception             | Fix line, no retry           |
| the same, Gemma 1/2          | 500 / 400 "System role not supported"               | system in the 1st user turn, kept |
| any                          | 429 / 5xx                                           | retried, the server's words logged |
"""

import json
import logging

import pytest

from conftest import Runner
from fakes import NapCat, PictureServer, is_expansion_request, is_summary_request, png, run_bot, text_of, wait_for
import bot

ZHIPU_1301 = {"contentFilter": [{"level": 1, "role": "user"}], "error": {
    "code": "1301", "message": "系统检测到输入或生成内容可能包含不安全或敏感内容，请您避免输入易产生敏感内容的提示语，感谢您的配合。"}}
DASHSCOPE_INSPECTION = {"error": {"code": "data_inspection_failed", "param": None, "type": "data_inspection_failed",
                                  "message": "Input data may contain inappropriate content."},
                        "id": "chatcmpl-0", "request_id": "649b2bbc-c541-9e16-9845-db7fe4fe5b2d"}
DEEPSEEK_RISK = {"error": {"message": "Content Exists Risk", "type": "invalid_request_error", "param": None,
                           "code": "invalid_request_error"}}
KIMI_FILTER = {"error": {"type": "content_filter",
                         "message": "The request was rejected because it was considered high risk"}}
AZURE_FILTER = {"error": {"message": "The response was filtered due to the prompt triggering Azure OpenAI's content "
                                     "management policy.", "type": None, "param": "prompt", "code": "content_filter",
                          "status": 400}}
DEEPSEEK_402 = {"error": {"message": "Insufficient Balance", "type": "unknown_error", "param": None,
                          "code": "invalid_request_error"}}
OPENAI_QUOTA = {"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                          "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}


def chat(napcat, llm, user, text):
    """The bot's reply to text and the LLM requests it made for it (not summaries or expansions)."""
    before = len(llm.requests)
    reply = napcat.ask(user, text)
    return reply, [r for r in llm.requests[before:]
                   if not is_summary_request(r["json"]) and not is_expansion_request(r["json"])]


def fallbacks(runner, cid):
    return runner.app.characters.get()["cards"][cid]["memory"]["fallback_replies"]


# Content-safety refusals: a short in-character answer, no retry ###############

@pytest.mark.parametrize("status, body", [
    (400, ZHIPU_1301), (400, DASHSCOPE_INSPECTION), (400, DEEPSEEK_RISK), (400, KIMI_FILTER), (400, AZURE_FILTER),
    (400, {"detail": "Content Exists Risk"}),  # DeepSeek's older shape
], ids=["zhipu-1301", "dashscope", "deepseek", "kimi", "azure", "deepseek-detail"])
def test_a_content_safety_refusal_gets_an_in_character_answer_and_no_retry(runner, napcat, llm, status, body):
    assert "艾德蒙" in napcat.ask(31, "切换角色 knight")
    llm.script = [{"status": status, "body": json.dumps(body, ensure_ascii=False)}]
    reply, reqs = chat(napcat, llm, 31, "讲讲那场战争")
    assert reply in fallbacks(runner, "knight") and len(reqs) == 1
    assert napcat.ask(31, "再讲一个") == "echo:再讲一个"  # the next message is asked as usual


@pytest.mark.parametrize("finish", ["content_filter", "sensitive"])
def test_a_reply_stopped_by_the_filter_is_not_sent(runner, napcat, llm, finish):
    llm.script = [{"reply": "半句不该说的", "finish_reason": finish}]
    reply, reqs = chat(napcat, llm, 32, "你好")
    assert reply in fallbacks(runner, "assistant") and "半句" not in reply and len(reqs) == 1


def test_a_refused_expansion_is_not_asked_again(runner, napcat, llm):
    llm.expansions["我住在北京"] = {"status": 400, "body": json.dumps(DEEPSEEK_RISK)}
    napcat.ask(33, "记住，我住在北京")
    assert wait_for(lambda: runner.rows("SELECT 1 FROM memories WHERE expansion IS NOT NULL"))
    assert llm.expansion_requests() == ["我住在北京"]


# No balance: one Fix line and one notice to the superusers an hour ##########

@pytest.mark.parametrize("status, body", [
    (402, DEEPSEEK_402), (429, OPENAI_QUOTA),
    (429, {"error": {"code": "1113", "message": "您的账户已欠费，请充值后重试"}}),  # Zhipu: HTTP 429, not a rate limit
    (400, {"error": {"code": "Arrearage", "param": None, "type": "Arrearage",
                     "message": "Access denied, please make sure your account is in good standing."}}),  # DashScope
], ids=["deepseek-402", "openai-quota", "zhipu-1113", "dashscope-arrearage"])
def test_an_empty_account_is_told_once_an_hour_with_the_fix(runner, napcat, llm, caplog, monkeypatch, status, body):
    caplog.set_level(logging.INFO, logger="mnemo")
    llm.script = [{"status": status, "body": json.dumps(body)}] * 2
    reply, reqs = chat(napcat, llm, 34, "你好")
    assert reply == bot.LLM_DOWN_REPLY and len(reqs) == 1  # not retried
    notice = napcat.reply()
    assert notice["user_id"] == 42 and "余额不足" in text_of(notice)
    reply, reqs = chat(napcat, llm, 35, "在吗")
    assert reply == bot.LLM_DOWN_REPLY and len(reqs) == 1
    fixes = [r.getMessage() for r in caplog.records if "no balance or quota" in r.getMessage()]
    assert len(fixes) == 1 and fixes[0].startswith("Error: ") and "Fix: top it up" in fixes[0], fixes
    assert napcat.barrier(36) == []  # no second notice to 42 within the hour
    later = bot.clock() + bot.LLM_NOTICE_SECONDS + 1
    monkeypatch.setattr(bot, "clock", lambda: later)
    llm.script = [{"status": status, "body": json.dumps(body)}]
    assert napcat.ask(34, "还在吗") == bot.LLM_DOWN_REPLY
    assert "余额不足" in text_of(napcat.reply())  # an hour on: told again


# Model not found: Fix: LLM_MODEL ###########################################

@pytest.mark.parametrize("status, body", [
    (404, {"error": {"message": 'model "qwen3:8b" not found, try pulling it first', "type": "api_error",
                     "param": None, "code": None}}),  # Ollama
    (404, {"object": "error", "message": "The model `qwen3` does not exist.", "type": "NotFoundError",
           "param": None, "code": 404}),  # vLLM
    (404, {"error": {"message": "The model `gpt-x` does not exist or you do not have access to it.",
                     "type": "invalid_request_error", "param": None, "code": "model_not_found"}}),  # OpenAI, DashScope
    (400, {"error": {"message": "Model Not Exist", "type": "invalid_request_error", "param": None,
                     "code": "invalid_request_error"}}),  # DeepSeek
    (400, {"error": {"code": "1211", "message": "模型不存在，请检查模型代码。"}}),  # Zhipu
], ids=["ollama", "vllm", "openai", "deepseek", "zhipu"])
def test_a_model_the_server_lacks_names_the_setting(runner, napcat, llm, caplog, status, body):
    caplog.set_level(logging.INFO, logger="mnemo")
    llm.script = [{"status": status, "body": json.dumps(body, ensure_ascii=False)}]
    reply, reqs = chat(napcat, llm, 37, "你好")
    assert reply == bot.LLM_DOWN_REPLY and len(reqs) == 1
    assert any("Fix: set LLM_MODEL" in r.getMessage() for r in caplog.records)


def test_doctor_names_the_setting_when_ollama_lacks_the_model(env, llm):
    llm.script = [{"status": 404, "body": json.dumps({"error": {
        "message": 'model "deepseek-chat" not found, try pulling it first', "type": "api_error"}})}]
    p = run_bot("doctor", env=env)
    [line] = [x for x in p.stdout.splitlines() if x.startswith("FAIL") and "LLM endpoint" in x]
    assert "no model 'deepseek-chat'" in line and "Fix: set LLM_MODEL" in line and "ollama list" in line, line


# Context too long: the prompt shrinks, once ##################################

@pytest.mark.parametrize("status, body", [
    (400, {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                     "type": "exceed_context_size_error", "n_prompt_tokens": 4100, "n_ctx": 4096}}),  # llama-server
    (400, {"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you requested "
           "4700 tokens (4100 in the messages, 600 in the completion). Please reduce the length of the messages or "
           "completion.", "type": "BadRequestError", "param": None, "code": 400}),  # vLLM
    (400, {"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages resulted "
                     "in 9000 tokens. Please reduce the length of the messages.", "type": "invalid_request_error",
                     "param": "messages", "code": "context_length_exceeded"}}),  # OpenAI
], ids=["llama-server", "vllm", "openai"])
def test_a_prompt_longer_than_the_context_is_shortened_once(runner, napcat, llm, status, body):
    for n in range(6):
        napcat.ask(38, f"第{n}句：" + "我们聊聊天吧" * 30)
    llm.script = [{"status": status, "body": json.dumps(body)}, "短一点就好了"]
    reply, reqs = chat(napcat, llm, 38, "还记得吗")
    assert reply == "短一点就好了" and len(reqs) == 2
    first, second = (json.dumps(r["json"]["messages"], ensure_ascii=False) for r in reqs)
    assert len(second) < len(first) * 0.8 and reqs[1]["json"]["messages"][-1]["content"] == "还记得吗"
    llm.script = [{"status": status, "body": json.dumps(body)}] * 2
    reply, reqs = chat(napcat, llm, 38, "还在吗")
    assert reply == bot.LLM_DOWN_REPLY and len(reqs) == 2  # shrunk once, no more


def test_a_small_llama_server_context_gets_a_prompt_that_fits(env, llm):
    llm.context_chars = 900  # like llama-server -c with a small context: it refuses longer prompts
    r = Runner(dict(env, PROMPT_BUDGET="2000"))
    c = NapCat(r.cfg.ONEBOT_PORT)
    try:
        for n in range(5):
            assert c.ask(39, f"第{n}句：" + "今天天气不错" * 30).startswith("echo:")
    finally:
        c.close()
        r.stop()
    sizes = [sum(len(m["content"]) for m in x["json"]["messages"]) for x in llm.chat_requests()]
    assert max(sizes) > 900 and sizes[-1] <= 900  # refused, then shortened


def test_a_message_longer_than_the_context_is_cut_to_fit(env, llm, caplog):
    """llama-server -c 1500: the user's own message (up to BOT_MAX_MESSAGE) alone is too long; the retry uses the
    n_ctx the server gave, cuts the message, and says in the log what was cut."""
    caplog.set_level(logging.INFO, logger="mnemo")
    llm.context_chars = 1500
    r = Runner(env)
    c = NapCat(r.cfg.ONEBOT_PORT)
    try:
        text = "这是一段很长的话，" * 300  # 2700 characters, under BOT_MAX_MESSAGE
        reply = c.ask(48, text)
    finally:
        c.close()
        r.stop()
    first, second = (x["json"]["messages"] for x in llm.chat_requests())
    assert first[-1]["content"] == text and first != second
    assert sum(len(m["content"]) for m in second) <= 1500 and text.startswith(second[-1]["content"])
    assert reply == "echo:" + second[-1]["content"]
    assert any(f"the message {len(text)} -> {len(second[-1]['content'])} characters" in x.getMessage()
               for x in caplog.records)


def test_a_prompt_that_cannot_be_shortened_is_not_sent_again(runner, napcat, llm, caplog):
    caplog.set_level(logging.INFO, logger="mnemo")
    old = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing the "
                     "context size or enable context shift", "type": "invalid_request_error"}}  # older llama-server
    llm.script = [{"status": 400, "body": json.dumps(old)}]
    reply, reqs = chat(napcat, llm, 49, "你好")  # no turns, no memories: nothing to cut
    assert reply == bot.LLM_DOWN_REPLY and len(reqs) == 1
    assert any("Fix: lower PROMPT_BUDGET" in x.getMessage() for x in caplog.records)


# A chat template's refusal: the server's reason logged with its Fix, not retried; no system message ######

@pytest.mark.parametrize("status, body", [
    (500, {"error": {"code": 500, "message": "Conversation roles must alternate user/assistant/user/assistant/...",
                     "type": "server_error"}}),  # llama-server --jinja
    (400, {"object": "error", "message": "jinja2.exceptions.TemplateError: After the optional system message, "
           "conversation roles must alternate user/assistant/user/assistant/...", "type": "BadRequestError",
           "param": None, "code": 400}),  # vLLM
], ids=["llama-server", "vllm"])
def test_a_chat_template_refusal_is_logged_with_its_reason_and_not_retried(runner, napcat, llm, caplog, status, body):
    caplog.set_level(logging.INFO, logger="mnemo")
    llm.script = [{"status": status, "body": json.dumps(body)}]
    reply, reqs = chat(napcat, llm, 45, "你好")
    assert reply == bot.LLM_DOWN_REPLY and len(reqs) == 1
    failed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("LLM failed for p:45")]
    assert len(failed) == 1 and "roles must alternate" in failed[0]
    assert "Fix: the server's chat template refused the request: " in failed[0]


def test_a_5xx_is_logged_with_the_servers_words_and_the_key_masked(runner, napcat, llm, caplog):
    caplog.set_level(logging.INFO, logger="mnemo")
    oom = {"status": 500, "body": json.dumps({"error": {"code": 500, "message": "CUDA out of memory (key "
                                                        "sk-test-secret-key-123)", "type": "server_error"}})}
    llm.script = [oom] * 3
    reply, reqs = chat(napcat, llm, 46, "你好")
    assert reply == bot.LLM_DOWN_REPLY and len(reqs) == 3  # retried: it may pass
    lines = [r.getMessage() for r in caplog.records if "CUDA out of memory" in r.getMessage()]
    assert len(lines) == 3 and all("HTTP 500" in x and "(key ***)" in x for x in lines)
    assert "sk-test-secret" not in caplog.text


@pytest.mark.parametrize("status", [500, 400], ids=["llama-server", "vllm"])
def test_a_template_without_a_system_role_gets_it_in_the_first_user_turn(runner, napcat, llm, caplog, status):
    """Gemma 1/2 (google-gemma-7b-it's template) refuse any system message; the server says so once, the
    bot sends the system message inside the first user turn from then on, and logs that once."""
    caplog.set_level(logging.INFO, logger="mnemo")
    llm.template, llm.template_status = "google-gemma-7b-it", status
    llm.script = ["(refused)", "你好呀"]  # the refused request takes the first item
    reply, reqs = chat(napcat, llm, 47, "你好")
    assert reply == "你好呀" and len(reqs) == 2
    refused, folded = (r["json"]["messages"] for r in reqs)
    assert refused[0]["role"] == "system" and [m["role"] for m in folded] == ["user"]
    assert folded[0]["content"] == (f"{bot.LLM_FOLD_HEAD}\n{refused[0]['content']}\n{bot.LLM_FOLD_TAIL}\n\n"
                                    f"{refused[1]['content']}")
    reply, reqs = chat(napcat, llm, 47, "在吗")  # kept: no second refusal
    assert reply == "echo:在吗" and len(reqs) == 1
    assert [m["role"] for m in reqs[0]["json"]["messages"]] == ["user", "assistant", "user"]
    assert bot.LLM_FOLD_HEAD in reqs[0]["json"]["messages"][0]["content"]
    assert sum("refuses a system message" in r.getMessage() for r in caplog.records) == 1


def test_doctor_asks_like_a_reply_and_says_when_the_template_refuses_a_system_message(env, llm):
    llm.template = "google-gemma-7b-it"
    p = run_bot("doctor", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert [m["role"] for m in llm.requests[0]["json"]["messages"]] == ["system", "user"]
    assert {r["json"]["max_tokens"] for r in llm.requests} == {600}  # LLM_MAX_TOKENS: room for a short answer
    line = next(x for x in p.stdout.splitlines() if x.startswith("ok    LLM endpoint"))
    assert "refuses a system message" in line


def test_a_picture_for_a_llama_server_without_mmproj_gets_the_fix_in_the_log(env, llm, caplog):
    caplog.set_level(logging.INFO, logger="mnemo")
    pictures = PictureServer()
    pictures.pictures["cat.png"] = (png(), 0)
    msg = "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"
    llm.vision_reply = {"status": 500, "body": json.dumps({"error": {"code": 500, "message": msg,
                                                                      "type": "server_error"}})}
    r = Runner(dict(env, VISION_MODEL="vl-test"))
    c = NapCat(r.cfg.ONEBOT_PORT)
    try:
        c.event(52, message=[{"type": "image", "data": {"file": "cat.png", "url": pictures.url("cat.png")}},
                             {"type": "text", "data": {"text": "看我家猫"}}])
        assert bot.PICTURE_TEXT in c.reply_text()
    finally:
        c.close()
        r.stop()
        pictures.close()
    assert len(llm.vision_requests()) == 1  # the same answer again: not retried
    assert any("Fix: start llama-server with --mmproj" in x.getMessage() for x in caplog.records)


# An unsupported parameter: what the server asks for, kept #####################

def test_max_tokens_refused_is_sent_as_max_completion_tokens_from_then_on(runner, napcat, llm, caplog):
    caplog.set_level(logging.INFO, logger="mnemo")
    llm.refused_params = {"max_tokens": "max_completion_tokens"}
    assert napcat.ask(40, "你好") == "echo:你好"
    assert napcat.ask(40, "在吗") == "echo:在吗"
    bodies = [x["json"] for x in llm.requests]
    assert "max_tokens" in bodies[0] and all("max_tokens" not in b for b in bodies[1:])
    assert all(b["max_completion_tokens"] > 0 for b in bodies[1:]) and len(bodies) == 3  # one refusal in all
    assert sum("max_completion_tokens" in r.getMessage() for r in caplog.records) == 1


def test_a_parameter_refused_without_a_replacement_is_left_out(runner, napcat, llm):
    llm.refused_params = {"max_tokens": None}
    assert napcat.ask(41, "你好") == "echo:你好"
    assert napcat.ask(41, "在吗") == "echo:在吗"
    assert [sorted(x["json"]) for x in llm.requests] == [["max_tokens", "messages", "model"]] + \
        [["messages", "model"]] * 2


# Reasoning models: the thinking never reaches QQ ############################

@pytest.mark.parametrize("item, answer", [
    ({"reply": "<think>\n用户在打招呼，我该友好回应。\n</think>\n\n你好呀！"}, "你好呀！"),  # Qwen3, R1 on Ollama (old)
    ({"reply": "用户在打招呼，我该友好回应。\n</think>\n\n你好呀！"}, "你好呀！"),  # R1-Distill: <think> is in the template
    ({"reply": "你好呀！", "message": {"reasoning_content": "用户在打招呼，我该友好回应。"}}, "你好呀！"),  # DeepSeek, llama.cpp
    ({"reply": "你好呀！", "message": {"reasoning": "用户在打招呼，我该友好回应。"}}, "你好呀！"),  # Ollama /v1, vLLM
    ({"reply": "<think>\n\n</think>\n\n你好呀！"}, "你好呀！"),  # Qwen3 with thinking off
], ids=["think-tags", "lone-close", "reasoning_content", "reasoning", "empty-think"])
def test_the_thinking_is_dropped(runner, napcat, llm, item, answer):
    llm.script = [item]
    reply, reqs = chat(napcat, llm, 43, "你好")
    assert reply == answer and len(reqs) == 1
    stored = runner.rows("SELECT text FROM messages WHERE session = 'p:43' AND role = 'assistant'")
    assert stored == [{"text": answer}]


@pytest.mark.parametrize("item", [
    {"reply": "<think>\n用户在打招呼，让我想想怎么回应比较好，首先", "finish_reason": "length"},
    {"reply": None, "exact": True, "finish_reason": "length", "message": {"reasoning_content": "想啊想" * 100}},
    {"reply": "", "exact": True, "finish_reason": "length", "message": {"reasoning": "想啊想" * 100}},
], ids=["cut-off-think", "reasoning_content-only", "ollama-reasoning-only"])
def test_thinking_that_used_the_budget_is_asked_again_with_room(runner, napcat, llm, caplog, item):
    caplog.set_level(logging.INFO, logger="mnemo")
    llm.script = [item, "想好了：你好！"]
    reply, reqs = chat(napcat, llm, 44, "你好")
    assert reply == "想好了：你好！" and len(reqs) == 2
    assert reqs[1]["json"]["max_tokens"] == reqs[0]["json"]["max_tokens"] + bot.LLM_THINKING_ROOM
    assert any("thinking used up max_tokens" in r.getMessage() for r in caplog.records)
    llm.script = [item, item]
    reply, reqs = chat(napcat, llm, 44, "再说一次")
    assert reply == bot.LLM_DOWN_REPLY and len(reqs) == 2  # never an empty reply, never the thinking


@pytest.mark.parametrize("text, answer", [
    ("<think>a</think>b<think>c</think>d", "bd"),
    ("前面</think>后面", "后面"),
    ("<think>没想完", ""),
    ("没有思考", "没有思考"),
])
def test_strip_thinking(text, answer):
    assert bot.llm_strip_thinking(text) == answer
