"""Forgotten means gone from every prompt (#20 point 8): a summary sentence, a chat turn or a reply that says a
forgotten memory in other words is rewritten too, and what only shares a word with it stays.

The table is tests/data/forget_paraphrase.jsonl (split dev / heldout; the held-out rows were written before the
code and not tuned on). Each row's texts are stored the way the bot stores them (a summary of sentences, user
turns, the character's replies), the memory is forgotten with memory_redact inside a transaction, and what is
left is read back. Run it alone for the figures:

    python tests/test_forget_paraphrase.py [--verbose]
"""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bot  # noqa: E402

TABLE = Path(__file__).resolve().parent / "data" / "forget_paraphrase.jsonl"


def load_rows():
    return [json.loads(line) for line in TABLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def _summary_texts(sentences):
    """The row's summary sentences as the bot stores summaries: a Chinese one and, apart, an English one."""
    zh = [s for s in sentences if not s.isascii()]
    en = [s for s in sentences if s.isascii()]
    out = []
    if zh:
        out.append("此前，" + "。".join(zh) + "。")
    if en:
        out.append("Earlier: " + " ".join(s if s.endswith(".") else s + "." for s in en))
    return out


def run_row(conn, n, row):
    """Stores one row's memory and texts for user n, forgets the memory; returns the texts wrongly left or lost."""
    uid, session, now = str(1000 + n), f"p:{1000 + n}", 1.7e9
    items = [("scrub", k, t) for k, t in row["scrub"]] + [("keep", k, t) for k, t in row["keep"]]
    with bot.db_tx(conn):
        fact = bot.memory_fact(row["memory"])
        mid = bot.memory_insert(conn, None, user_id=uid, text=fact.text, subject=fact.subject,
                                attribute=fact.attribute, value=fact.value)
        for role, text in (("user", "记住，" + row["memory"]), ("assistant", f"好的，记住了：“{fact.text}”")):
            conn.execute("INSERT INTO messages (session, user_id, speaker, role, character_id, text, kind, created_at) "
                         "VALUES (?, ?, '阿明', ?, 'default', ?, 'command', ?)", (session, uid, role, text, now))
        for i, (_, kind, text) in enumerate(items):
            if kind in ("turn", "reply"):
                conn.execute("INSERT INTO messages (session, user_id, speaker, role, character_id, text, kind, "
                             "created_at) VALUES (?, ?, ?, ?, 'default', ?, 'chat', ?)",
                             (session, uid, "阿明" if kind == "turn" else "小满",
                              "user" if kind == "turn" else "assistant", text, now + i))
        for text in _summary_texts([t for _, k, t in items if k == "summary"]):
            conn.execute("INSERT INTO summaries (session, character_id, first_msg, last_msg, level, text, method, "
                         "created_at) VALUES (?, 'default', 1, 2, 0, ?, 'llm', ?)", (session, text, now))
    with bot.db_tx(conn):
        target = conn.execute("SELECT * FROM memories WHERE id = ?", (mid,)).fetchone()
        conn.execute("DELETE FROM memories WHERE id = ?", (mid,))
        bot.memory_redact(conn, uid, [target])
    said = " ".join(r[0] for r in conn.execute("SELECT text FROM messages WHERE session = ?", (session,)))
    said += " ".join(r[0] for r in conn.execute("SELECT text FROM summaries WHERE session = ?", (session,)))
    left = [t for want, _, t in items if want == "scrub" and t in said]
    lost = [t for want, _, t in items if want == "keep" and t not in said]
    return left, lost


def run_table(tmp_path):
    """[(row, texts left that should be gone, texts lost that should stay)]."""
    conn = bot.db_connect(Path(tmp_path) / "forget.db")
    return [(row, *run_row(conn, n, row)) for n, row in enumerate(load_rows())]


def figures(results):
    """{split: (rows right, rows, scrubbed, to scrub, kept, to keep)}."""
    out = {}
    for split in ("dev", "heldout"):
        rs = [(row, left, lost) for row, left, lost in results if row["split"] == split]
        out[split] = (sum(not left and not lost for _, left, lost in rs), len(rs),
                      sum(len(row["scrub"]) - len(left) for row, left, _ in rs), sum(len(row["scrub"]) for row, _, _ in rs),
                      sum(len(row["keep"]) - len(lost) for row, _, lost in rs), sum(len(row["keep"]) for row, _, _ in rs))
    return out


def test_forget_paraphrase_table(tmp_path):
    results = run_table(tmp_path)
    got = figures(results)
    wrong = [f"{row['id']}: left {left} lost {lost}" for row, left, lost in results if left or lost]
    print("\n".join(wrong))
    # every dev row; the held-out floors are the figures measured when this was written (before the change: dev
    # 0/30 rows, 16/90 scrubbed; held out 0/10, 2/28); the held-out misses are reported, not tuned away
    assert got["dev"][0] == got["dev"][1] and got["dev"][4] == got["dev"][5], wrong
    assert got["heldout"][0] >= 5 and got["heldout"][2] >= 24 and got["heldout"][4] >= 19, (got, wrong)


if __name__ == "__main__":
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        res = run_table(d)
    for split, (ok, n, gone, scrub, kept, keep) in figures(res).items():
        print(f"{split}: {ok}/{n} rows right; paraphrases scrubbed {gone}/{scrub}; unrelated kept {kept}/{keep}")
    if "--verbose" in sys.argv:
        for row, left, lost in res:
            if left or lost:
                print(f"  {row['split']} {row['id']}: left {left} lost {lost}")


# Through the real bot: NapCat in, the fake LLM out ###########################

import threading  # noqa: E402
import time  # noqa: E402

import fakes  # noqa: E402

#: What the fake LLM summarises a window into: the way an LLM words it, from what the window says now.
SUMMARY_WITH = "此前，用户说自己最近在服用抗抑郁的药物，吃完总犯困。他说最近在准备考研。我答应周末陪他去爬山。"
SUMMARY_WITHOUT = "此前，他说最近在准备考研。我答应周末陪他去爬山。"
#: The user's chat turns: one says the memory in other words, the others talk about other things.
TURNS = ["那个抗抑郁药吃得我好困", "我最近在准备考研", "周末想去爬山", "晚上想吃火锅", "今天地铁好挤", "数学好难",
         "英语单词背不完", "政治还没开始看", "室友打呼噜", "楼下新开了奶茶店", "明天降温", "想买个台灯"]


def _summarising(llm, gate=None):
    """The fake LLM answers a summary request from the transcript it was given (gate: the first one waits)."""
    waits = [gate] if gate else []

    def answer(body):
        if not fakes.is_summary_request(body):
            return None
        said = body["messages"][-1]["content"]
        item = {"reply": SUMMARY_WITH if "抗抑郁" in said else SUMMARY_WITHOUT}
        return item | ({"gate": waits.pop()} if waits else {})
    llm.answer = answer


def _wait(cond, what, timeout=20):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, what
        time.sleep(0.05)


def _index_has(runner, table, word):
    return runner.rows(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", f'tokens : "{word}"')


def test_a_forgotten_memory_said_in_other_words_leaves_every_prompt(runner, napcat, llm):
    """记住 → chat and a summary that say it in other words → 忘记: the next request the LLM gets has none of it
    (summary sentence, turn, the reply that repeated it), and the rest of the summary and chat is still there."""
    _summarising(llm)
    napcat.ask(901, "记住，我在吃抗抑郁药")
    assert [r["text"] for r in runner.rows("SELECT text FROM memories WHERE user_id = '901'")] == ["我在吃抗抑郁药"]
    llm.script.append("记得按时吃抗抑郁药哦")  # the reply to the first turn repeats it in its own words
    for text in TURNS:
        napcat.ask(901, text)
    _wait(lambda: runner.rows("SELECT id FROM summaries WHERE session = 'p:901'"), "no summary was written")
    summary = runner.rows("SELECT text FROM summaries WHERE session = 'p:901'")[0]["text"]
    assert "服用抗抑郁的药物" in summary and _index_has(runner, "summaries_fts", "抑郁")
    assert napcat.ask(901, "忘记我在吃抗抑郁药").startswith("已忘记")
    napcat.ask(901, "今天好累啊")
    sent = json.dumps(llm.chat_requests()[-1]["json"]["messages"], ensure_ascii=False)
    for gone in ("抑郁", "服用", "按时吃"):
        assert gone not in sent, (gone, sent)
    for kept in ("准备考研", "陪他去爬山", "晚上想吃火锅", "想买个台灯"):
        assert kept in sent, (kept, sent)
    # nor can search find it: the index rows went with the words
    assert not _index_has(runner, "summaries_fts", "抑郁") and not _index_has(runner, "messages_fts", "抑郁")
    assert _index_has(runner, "summaries_fts", "爬山")


def test_a_summary_written_while_the_memory_was_forgotten_is_written_again(runner, napcat, llm):
    """The LLM is writing a summary of turns that say the memory when the user says 忘记: what it wrote from the
    old words is not stored; the window is summarised again from what its turns say now."""
    gate = threading.Event()
    _summarising(llm, gate)
    napcat.ask(902, "记住，我在吃抗抑郁药")
    for text in TURNS:
        napcat.ask(902, text)
    _wait(lambda: any(fakes.is_summary_request(r["json"]) for r in llm.requests), "no summary was asked for")
    assert napcat.ask(902, "忘记我在吃抗抑郁药").startswith("已忘记")
    gate.set()
    _wait(lambda: runner.rows("SELECT id FROM summaries WHERE session = 'p:902'"), "no summary was written")
    texts = [r["text"] for r in runner.rows("SELECT text FROM summaries WHERE session = 'p:902'")]
    assert texts == [SUMMARY_WITHOUT], texts
    asked = [r["json"]["messages"][-1]["content"] for r in llm.requests if fakes.is_summary_request(r["json"])]
    assert len(asked) == 2 and "抗抑郁" in asked[0] and "抗抑郁" not in asked[1], asked


def test_a_group_line_that_said_it_leaves_the_group_prompt(runner, napcat, llm):
    """Said in a group to nobody in particular (an 'ambient' line, shown as what the group just said): after 忘记
    in a private chat the line no longer carries it, and the other lines stay."""
    napcat.event(1230222, "那个抗抑郁药吃得我好困", group_id=903, card="阿强")
    napcat.event(1230333, "今晚谁开黑", group_id=903, card="小红")
    napcat.ask(1230222, "记住，我在吃抗抑郁药")
    assert napcat.ask(1230222, "忘记我在吃抗抑郁药").startswith("已忘记")
    assert napcat.barrier(1230333, group_id=903, at_bot=True, card="小红") == []
    sent = json.dumps(llm.chat_requests()[-1]["json"]["messages"], ensure_ascii=False)
    assert "抗抑郁" not in sent and "今晚谁开黑" in sent and bot.FORGOTTEN_TEXT in sent, sent


def test_forgetting_hundreds_of_memories_at_once(tmp_path):
    """忘记所有关于我妈妈的 with 400 of them: one forget, every command that said one rewritten (a single SQL
    expression over all their words, 1,200 of them, was too deep for SQLite)."""
    conn = bot.db_connect(tmp_path / "many.db")
    with bot.db_tx(conn):
        for i in range(400):
            text = f"我妈妈喜欢第{i}号歌"
            bot.memory_insert(conn, None, user_id="7", text=text, subject="妈妈", attribute="喜欢", value=f"第{i}号歌")
            conn.execute("INSERT INTO messages (session, user_id, speaker, role, character_id, text, kind, created_at) "
                         "VALUES ('p:7', '7', '阿明', 'user', 'default', ?, 'command', 0)", ("记住，" + text,))
    rows = conn.execute("SELECT * FROM memories").fetchall()
    with bot.db_tx(conn):
        conn.execute("DELETE FROM memories")
        bot.memory_redact(conn, "7", rows)
    assert {r[0] for r in conn.execute("SELECT text FROM messages")} == {bot.FORGOTTEN_TEXT}
