"""A hostile group member and a careless operator (issue 19), through the real WebSocket and database:
one user's flood must not stall the others, a restore can't corrupt the database, the default
WebSocket takes no second client, follow-ups stay with their speaker, pictures and switches are held
to the same limits as messages."""

import random
import threading
import time

import pytest

import bot
from conftest import Runner
from fakes import NapCat, wait_for


def varied_chinese(n, seed=1):
    """n characters of varied Chinese: nearly every bigram new, the worst case for tokenising and search."""
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(n))


@pytest.fixture
def start(env):
    """Starts bots with extra settings; all stopped at the end."""
    started = []

    def go(**settings):
        r = Runner(dict(env, **{k: str(v) for k, v in settings.items()}))
        started.append(r)
        return r
    yield go
    for r in reversed(started):
        r.stop()


# 1. One user can't stall everyone ###########################################

def test_query_tokens_read_a_long_message_no_further_than_they_need():
    text = varied_chinese(76000)
    tokens = bot.text_query_tokens(text)
    assert len(tokens) == bot.QUERY_MAX_TOKENS
    assert tokens == bot.text_query_tokens(text[:bot.QUERY_MAX_TOKENS])  # the rest was never read
    assert len(bot.text_search_text(text)) <= bot.SEARCH_MAX_CHARS + 1
    assert bot.text_search_text("短消息") == "短消息"


def test_the_database_thread_serves_users_in_turn():
    """One owner's 40 queued jobs hold another owner's job back by one job, not by forty."""
    queue = bot.FairQueue("test-db")
    order, gate = [], threading.Event()
    try:
        queue.submit(gate.wait, owner="flood")  # the worker is busy while the line forms
        flood = [queue.submit(order.append, f"flood{i}", owner="flood") for i in range(40)]
        other = queue.submit(order.append, "other", owner="other")
        gate.set()
        other.result(10)
        for f in flood:
            f.result(10)
    finally:
        queue.shutdown()
    assert order.index("other") <= 1
    assert [x for x in order if x != "other"] == [f"flood{i}" for i in range(40)]  # each owner's in its order


def test_a_76000_character_message_is_answered_and_costs_a_capped_search(start, llm):
    runner = start(BOT_MAX_MESSAGE=80000)
    nc = NapCat(runner.cfg.ONEBOT_PORT)
    try:
        text = varied_chinese(76000)
        t = time.monotonic()
        nc.event(1, text)
        assert nc.reply_text(timeout=60).startswith("echo:")
        took = time.monotonic() - t  # was minutes (13 s per query tokenising, several queries a message)
        assert took < 45, took
        assert llm.chat_requests()[-1]["json"]["messages"][-1]["content"] == text  # the LLM still reads it all
        nc.barrier(1)  # the long echo's further parts
        row = runner.rows("SELECT m.id, f.tokens FROM messages m JOIN messages_fts f ON f.rowid = m.id "
                          "WHERE m.session = 'p:1' AND m.role = 'user'")[0]
        indexed = row["tokens"].split()
        assert len(indexed) <= 2 * bot.SEARCH_MAX_CHARS + 10  # what is indexed of it is capped, as its search
        assert nc.ask(2, "别人也在") == "echo:别人也在"
    finally:
        nc.close()


def test_a_burst_of_long_messages_is_read_one_message_worth_at_a_time(start, llm):
    runner = start(BOT_MAX_MESSAGE=3000)
    nc = NapCat(runner.cfg.ONEBOT_PORT)
    try:
        llm.script = [{"delay": 1.0, "reply": "先回第一条"}]
        nc.event(1, "第一条")
        assert wait_for(lambda: len(llm.chat_requests()) == 1, 10)
        for i in range(5):  # they wait for the chat's lock: a burst
            nc.event(1, varied_chinese(2500, seed=i))
        assert nc.reply_text() == "先回第一条"
        replies = [nc.reply_text(timeout=30) for _ in range(5)]
        assert all(r.startswith("echo:") for r in replies)
        for r in llm.chat_requests()[1:]:
            assert len(r["json"]["messages"][-1]["content"]) <= runner.cfg.BOT_MAX_MESSAGE
    finally:
        nc.close()
