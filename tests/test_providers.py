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
| any                          | 429 / 5xx                                           | retried (test_reliability)   |
"""

import json
import logging

import pytest

from conftest import Runner
from fakes import NapCat, is_expansion_request, is_summary_request, run_bot, text_of, wait_for
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
