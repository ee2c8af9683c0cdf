#!/usr/bin/env python3
"""Mnemo's benchmark: measured, never asserted. It prints the figures in the README's "Measured" table.

    .venv/bin/python tests/bench.py [--json] [--quick] [--data DIR]    # search, import, recall, OOC, prompt size
    .venv/bin/python tests/bench.py --load [--json]                  # the bot as a process: load, soak, kill -9
    .venv/bin/python tests/bench.py --flood [--json]                 # another user's replies while one floods
    .venv/bin/python tests/bench.py --flood-group [--json]           # only its same-group case
    .venv/bin/python tests/bench.py --reply [--runs N]               # reply latency at 0 and 100k memories
    .venv/bin/python tests/bench.py --forget [--runs N]              # 忘记 and 忘记关于我的一切 at 100k messages
    .venv/bin/python tests/bench.py --footprint [--quick]            # also tests/footprint.py: start time, RSS, encode speed
    .venv/bin/python tests/bench.py --parse [--against REV] [--lines REV] [--passes N]  # the rules: memory_parse µs

The vector model is tokenlearn-static-model's small test model when it is installed (--model to choose
another; without either, the bot's EMBED_MODEL). --data is a folder with the public evaluation sets
(memorybank/memory_bank_cn.json, locomo10.json and locomo_recall.py); the parts that need them are
skipped, with a note, when it is not given. The LLM and the QQ side are the test fakes (tests/fakes.py).
--footprint builds a 500 MB model folder the first time (in ~/.cache/mnemo-footprint), so it is off by default."""

import argparse
import collections
import contextlib
import datetime
import itertools
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fakes import ROOT, BotProcess, FakeLLM, NapCat, free_port, model_folder, text_of
import bot
import footprint

HERE = Path(__file__).resolve().parent

#: Synthetic memories for the speed figures: templates and what fills them.
_BENCH_TEMPLATES = ["我住在{city}{area}", "我喜欢吃{food}", "我不吃{food}", "我对{allergen}过敏", "我养了一只叫{name}的{pet}",
                    "我在{city}的{company}做{job}", "我的生日是{m}月{d}日", "我每周{w}去{place}{act}", "我女儿叫{name}",
                    "我在学{lang}，准备考试", "我最喜欢的歌手是{singer}", "我下个月要去{city}出差", "我每天早上{act}"]
_BENCH_FILL = {"city": "北京 上海 广州 深圳 成都 杭州 武汉 西安 南京 重庆 苏州 长沙".split(),
               "area": "朝阳区 海淀区 浦东 天河 高新区 西湖边 江汉路 雁塔 鼓楼".split(),
               "food": "香菜 榴莲 火锅 寿司 花生 辣椒 芒果 羊肉 海鲜 豆腐 螺蛳粉 臭豆腐".split(),
               "allergen": "花生 青霉素 猫毛 花粉 海鲜 芒果 尘螨 牛奶".split(),
               "name": "年糕 可乐 豆豆 朵朵 小白 旺财 米粒 团子 奶茶".split(), "pet": "猫 柯基 金毛 仓鼠 鹦鹉 兔子".split(),
               "company": "游戏公司 银行 医院 学校 外企 创业公司 设计院".split(),
               "job": "后端开发 产品经理 护士 老师 会计 设计师 销售".split(), "m": [str(i) for i in range(1, 13)],
               "d": [str(i) for i in range(1, 29)], "w": "一 二 三 四 五 六 日".split(),
               "place": "健身房 游泳馆 图书馆 公园 球场".split(), "act": "跑步 打羽毛球 游泳 看书 练瑜伽 写代码".split(),
               "lang": "日语 英语 法语 Python 钢琴 德语".split(), "singer": "周杰伦 陈奕迅 Taylor Swift 王菲 五月天".split()}
_BENCH_QUERIES = ["{city}今天天气怎么样", "推荐几家{food}好吃的店", "{pet}最近不爱吃饭怎么办", "周{w}有什么安排",
                  "{lang}怎么学比较快", "{allergen}过敏要注意什么", "生日那天想吃{food}", "{singer}出新歌了吗"]


def _bench_texts(rng, n, templates=_BENCH_TEMPLATES):
    return [rng.choice(templates).format(**{k: rng.choice(v) for k, v in _BENCH_FILL.items()}) for _ in range(n)]


def _pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else float("nan")


def _rss_mb(pid="self"):
    with contextlib.suppress(OSError):
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def bench_search(embedder, tmpdir, quick=False):
    """Search latency (what a prompt's memories take: memory_for_prompt, query embedding included) and
    import rate at 1k / 10k / 100k memories."""
    rng = random.Random(7)
    out = []
    sizes = [(1_000, 100), (10_000, 100), (10_000, 1_000), (100_000, 100), (100_000, 1_000)]
    if quick:
        sizes = sizes[:3]
    for total, per_user in sizes:
        path = Path(tmpdir) / f"bench-{total}-{per_user}.db"
        conn = bot.db_connect(path)
        if embedder.model is not None:
            bot.db_vec_prepare(conn, embedder.name, embedder.dim)
        users = total // per_user
        lines = [json.dumps({"user_id": str(10_000 + i // per_user), "text": t}, ensure_ascii=False)
                 for i, t in enumerate(_bench_texts(rng, total))]
        t0 = time.perf_counter()
        bot.memory_import_rows(conn, embedder, lines)
        rate = total / (time.perf_counter() - t0)
        times = []
        for _ in range(300):
            ctx = bot.Ctx(user_id=str(10_000 + rng.randrange(users)), session="p:x", character_id="assistant")
            q = rng.choice(_BENCH_QUERIES).format(**{k: rng.choice(v) for k, v in _BENCH_FILL.items()})
            t1 = time.perf_counter()
            vec = embedder.encode([q])[0] if embedder.model is not None else None
            bot.memory_for_prompt(conn, ctx, q, vec, limit=5, min_similarity=embedder.floor, touch=False)
            times.append((time.perf_counter() - t1) * 1000)
        out.append({"memories": total, "per_user": per_user, "users": users, "search_p50_ms": round(_pct(times, 50), 2),
                    "search_p95_ms": round(_pct(times, 95), 2), "import_per_s": round(rate)})
        conn.close()
        for p in path.parent.glob(path.name + "*"):
            p.unlink()
    return out


def bench_recall(embedder, path, k=5, expansions=None):
    """recall@k by query kind on a Chinese recall set: BM25 alone, vectors alone, the hybrid search
    (memory_search, with topics and aliases), the k places (memory_for_prompt: the search, then the
    profile facts, then memories sharing characters) and the pipeline (what a prompt carries:
    memory_context, the user's profile and the places). Beside them what that costs: memories and
    memory tokens (profile + memory lines) per prompt, and how many of another user's memories the same
    message admits to the places, the profile facts left out (they have nothing to do with it).
    expansions ({memory text: the LLM's reply to bot.EXPAND_PROMPT}) are stored as the bot stores them."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    conn = bot.db_connect(":memory:")
    if embedder.model is not None:
        bot.db_vec_prepare(conn, embedder.name, embedder.dim)
    floor = embedder.floor if embedder.model is not None else 1.0
    ids, texts = {}, {}
    with bot.db_tx(conn):
        for u in data["users"]:
            vecs = embedder.encode(u["memories"]) if embedder.model is not None else [None] * len(u["memories"])
            for i, (text, vec) in enumerate(zip(u["memories"], vecs)):
                f = bot.memory_fact(text)  # stored as 记住 stores it: subject, attribute, areas
                ids[(u["user_id"], i)] = bot.memory_insert(conn, vec, user_id=u["user_id"], text=text, subject=f.subject,
                                                           attribute=f.attribute, value=f.value)
                texts[ids[(u["user_id"], i)]] = text
    for memory_id, text in texts.items() if expansions else ():
        bot.memory_expansion_store(conn, memory_id, text, expansions[text])
    hits = collections.defaultdict(lambda: collections.Counter())
    admitted, sizes, tokens, profile_tokens, places_tokens = [], [], [], [], []
    users = [u["user_id"] for u in data["users"]]
    for n, q in enumerate(data["queries"]):
        gold = ids[(q["user_id"], q["answer"])]
        vec = embedder.encode([q["query"]])[0] if embedder.model is not None else None
        ctx = bot.Ctx(user_id=q["user_id"], session=f"p:{q['user_id']}", character_id="assistant")
        search = [r["id"] for r in bot.memory_search(conn, ctx, q["query"], vec, limit=k, min_similarity=floor, touch=False)]
        profile, memories = bot.memory_context(conn, ctx, q["query"], vec, limit=k, min_similarity=floor, touch=False)
        places = [r for r, _ in bot.memory_for_prompt(conn, ctx, q["query"], vec, limit=k, min_similarity=floor, touch=False)]
        places_tokens.append(sum(bot.text_count_tokens(bot.prompt_memory_line(r)) + 2 for r in places))
        found = {"bm25": [i for i, _ in bot.search_keyword(conn, "memories_fts", q["user_id"], q["query"], k)],
                 "vector": [i for i, _ in bot.search_vector(conn, "memories_vec", q["user_id"], vec, k)] if vec is not None else [],
                 "hybrid": search,
                 "places": [r["id"] for r in places],
                 "pipeline": [r["id"] for r in (profile or {}).get("sources", [])] + [r["id"] for r, _ in memories]}
        sizes.append(len(found["pipeline"]))
        # what the prompt carries for it, in tokens: the profile (rule-made here: no LLM) and the memory lines
        profile_tokens.append(bot.text_count_tokens(profile["text"]) if profile else 0)
        tokens.append(profile_tokens[-1] + sum(bot.text_count_tokens(bot.prompt_memory_line(r)) + 2 for r, _ in memories))
        for method, got in found.items():
            for kind in (q["kind"], "all"):
                hits[(method, kind)]["n"] += 1
                hits[(method, kind)]["hit"] += gold in (got if method == "pipeline" else got[:k])  # its k are the places
        # the same message asked of another user, whose memories it has nothing to do with
        other = users[(users.index(q["user_id"]) + 1 + n % (len(users) - 1)) % len(users)]
        octx = bot.Ctx(user_id=other, session=f"p:{other}", character_id="assistant")
        admitted.append(sum(how != "profile" for _, how in bot.memory_for_prompt(conn, octx, q["query"], vec, limit=k,
                                                                                   min_similarity=floor, touch=False)))
    kinds = sorted({q["kind"] for q in data["queries"]}) + ["all"]
    methods = ("bm25", "vector", "hybrid", "places", "pipeline") if embedder.model is not None else (
        "bm25", "hybrid", "places", "pipeline")
    return {m: {kind: round(hits[(m, kind)]["hit"] / max(1, hits[(m, kind)]["n"]), 3) for kind in kinds} for m in methods} | {
        "queries": {kind: hits[("bm25", kind)]["n"] for kind in kinds}, "floor": floor,
        "memories_per_prompt": round(statistics.mean(sizes), 2),
        "memory_tokens_per_prompt": round(statistics.mean(tokens), 1),
        "profile_tokens_per_prompt": round(statistics.mean(profile_tokens), 1),
        "places_tokens_per_prompt": round(statistics.mean(places_tokens), 1),  # the k places alone (no profile)
        "unrelated_admitted_per_message": round(statistics.mean(admitted), 2)}


#: The recall sets: tuned on (recall_zh, recall_zh_dev) and held out (never tuned on).
RECALL_SETS = ("recall_zh.json", "recall_zh_dev.json", "recall_zh_heldout.json")


def bench_recall_sets(embedder, k=5):
    """bench_recall on every recall set, keyword-only and with the model, each without and with the
    recorded LLM expansions (tests/data/recall_expansions.json)."""
    expansions = json.loads((HERE / "data" / "recall_expansions.json").read_text(encoding="utf-8"))["replies"]
    off = bot.Embedder("off")
    out = {}
    for name in RECALL_SETS:
        path = HERE / "data" / name
        out[name] = {"keyword_only": bench_recall(off, path, k),
                     "keyword_only+expansion": bench_recall(off, path, k, expansions)}
        if embedder.model is not None:
            out[name]["with_model"] = bench_recall(embedder, path, k)
            out[name]["with_model+expansion"] = bench_recall(embedder, path, k, expansions)
    return out


def bench_ooc(path, characters):
    """Precision and recall of the out-of-character rule check on the labelled replies."""
    cards = bot.character_parse(Path(characters).read_text(encoding="utf-8"))["cards"]
    tp = fp = fn = tn = 0
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        flagged = bot.character_ooc(cards[row["character"]], row["reply"], cards) is not None
        tp += flagged and row["ooc"]
        fp += flagged and not row["ooc"]
        fn += not flagged and row["ooc"]
        tn += not flagged and not row["ooc"]
    return {"replies": tp + fp + fn + tn, "precision": round(tp / max(1, tp + fp), 3), "recall": round(tp / max(1, tp + fn), 3),
            "tp": tp, "fp": fp, "fn": fn, "tn": tn}


def _replay(conn, embedder, session, turns, every):
    """Stores turns [(speaker, role, text, tag, Unix time)] and summarises them as the bot does (extractive):
    returns {summary id: tags of the turns whose sentences it kept}."""
    kept = {}
    window = []
    for speaker, role, text, tag, when in turns:
        mid = conn.execute("INSERT INTO messages (session, user_id, speaker, role, character_id, text, onebot_id, created_at)"
                           " VALUES (?, '1', ?, ?, 'assistant', ?, ?, ?)", (session, speaker, role, text, tag, when)).lastrowid
        window.append({"id": mid, "speaker": speaker, "text": text, "tag": tag, "role": role})
        if sum(w["role"] == "user" for w in window) >= every and role == "assistant" or len(window) >= 2 * every:
            text_, idx = bot.summary_extractive([(w["speaker"], w["text"]) for w in window])
            vec = embedder.encode([text_])[0] if embedder.model is not None else None
            sid = bot.summary_store(conn, session, "assistant", window, text_, "extractive", vec)
            kept[sid] = [window[i]["tag"] for i in idx]
            window = []
    return kept


#: LoCoMo's conversations chosen on (recall's constants were tuned on these) and held out (never looked at).
LOCOMO_TUNED, LOCOMO_HELD_OUT = range(0, 5), range(5, 10)


def _locomo_time(stamp):
    """A LoCoMo session's date ('1:56 pm on 8 May, 2023') as local Unix time. Example: '' -> 0"""
    return datetime.datetime.strptime(stamp, "%I:%M %p on %d %B, %Y").timestamp() if stamp else 0


def bench_locomo(embedder, path, every=10):
    """LoCoMo evidence recall@5/@10 of the retrieval that builds prompts (summaries + older turns),
    with extractive summaries, and the context it costs as a share of the full history. Each message is
    stamped with its session's date, as a real message carries its time; the full history it is measured
    against is every turn plus one date line a session. Recall is asked for 5 and for 10 places (as a prompt
    with that many would), on all ten conversations and on the tuned and held-out halves."""
    sys.path.insert(0, str(Path(path).parent))
    import locomo_recall
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    rows_of = {}  # (conversation, category) -> [(recall@5, recall@10, share@5, share@10, tokens@5, tokens@10)]
    took = []
    for n, sample in enumerate(data):
        conn = bot.db_connect(":memory:")
        if embedder.model is not None:
            bot.db_vec_prepare(conn, embedder.name, embedder.dim)
        turns = locomo_recall.turns_of(sample)
        speakers = sorted({t["speaker"] for t in turns})
        rows = [(t["speaker"], "user" if t["speaker"] == speakers[0] else "assistant", t["text"], t["dia_id"],
                 _locomo_time(t["date"])) for t in turns]
        session = f"p:{n}"
        kept = _replay(conn, embedder, session, rows, every)
        full = sum(bot.text_count_tokens(f"{s}：{t}") for s, _, t, _, _ in rows) + \
            sum(bot.text_count_tokens(f"[{d}]") for d in dict.fromkeys(t["date"] for t in turns))
        msg_tag = {r[0]: r[1] for r in conn.execute("SELECT id, onebot_id FROM messages")}
        for qa in sample["qa"]:
            ev = locomo_recall.norm_evidence(qa.get("evidence", []))
            if not ev or qa["category"] not in (1, 2, 3, 4):
                continue
            q = qa["question"]
            vec = embedder.encode([q])[0] if embedder.model is not None else None
            row = []
            for k in (5, 10):
                t0 = time.perf_counter()
                ranked = bot.summary_recall(conn, session, "assistant", q, vec, limit=k, min_similarity=embedder.floor)
                took.append((time.perf_counter() - t0) * 1000)
                got = set()
                for kind, i, _, shown in ranked:
                    got.update(kept.get(i, []) if kind == "summary" else [msg_tag[m] for m in shown])
                tokens = sum(bot.text_count_tokens(text) for _, _, text, _ in ranked)
                row.append((sum(e in got for e in ev) / len(ev), tokens / max(1, full), tokens))
            rows_of.setdefault((n, qa["category"]), []).append(row)
        conn.close()

    def figures(convs):
        got = [r for (n, _), rs in rows_of.items() if n in convs for r in rs]
        out = {f"recall@{k}": {"all": round(statistics.mean(r[j][0] for r in got), 3)} | {
            locomo_recall.CATS[c]: round(statistics.mean(r[j][0] for (n, cat), rs in rows_of.items()
                                                         if n in convs and cat == c for r in rs), 3)
            for c in sorted({cat for _, cat in rows_of})} for j, k in enumerate((5, 10))}
        for j, k in enumerate((5, 10)):
            out[f"context_share@{k}"] = round(statistics.mean(r[j][1] for r in got), 4)
            out[f"context_tokens@{k}"] = round(statistics.mean(r[j][2] for r in got), 1)
        return out | {"questions": len(got)}

    return figures(range(len(data))) | {
        "tuned (conversations 0-4)": figures(LOCOMO_TUNED), "held out (conversations 5-9)": figures(LOCOMO_HELD_OUT),
        "recall_ms_p50": round(statistics.median(took), 2), "floor": "BM25 over single turns: recall@5 0.441, @10 0.518"}


def bench_prompt_growth(embedder, characters, path):
    """Prompt tokens per reply at turn 10 / 100 / 1,000, against sending the full history
    (MemoryBank's Chinese companion chats, replayed in a loop, summarised extractively)."""
    chats = json.loads(Path(path).read_text(encoding="utf-8"))
    pairs = [(p["query"], p["response"]) for user in chats.values() for day in user["history"].values() for p in day]
    card = bot.character_parse(Path(characters).read_text(encoding="utf-8"))["cards"]["assistant"]
    cfg = bot.config_load(environ={}, dotenv="/nonexistent")
    conn = bot.db_connect(":memory:")
    if embedder.model is not None:
        bot.db_vec_prepare(conn, embedder.name, embedder.dim)
    out, full = {}, 0
    window = []
    for turn in range(1, 1001):
        q, a = pairs[turn % len(pairs)]
        new = pairs[(turn + 1) % len(pairs)][0]
        for role, text in (("user", q), ("assistant", a)):
            mid = conn.execute("INSERT INTO messages (session, user_id, speaker, role, character_id, text, created_at) "
                               "VALUES ('p:1', '1', '用户', ?, 'assistant', ?, 0)", (role, text)).lastrowid
            window.append({"id": mid, "speaker": "用户" if role == "user" else "小满", "text": text})
            full += bot.text_count_tokens(text)
        if turn % cfg.SUMMARY_EVERY == 0:
            text_, _ = bot.summary_extractive([(w["speaker"], w["text"]) for w in window])
            bot.summary_store(conn, "p:1", "assistant", window, text_, "extractive",
                          embedder.encode([text_])[0] if embedder.model is not None else None)
            window = []
        if turn in (10, 100, 1000):
            ctx = bot.Ctx(user_id="1", session="p:1", character_id="assistant", message_id=mid + 1)
            vec = embedder.encode([new])[0] if embedder.model is not None else None
            parts = bot.prompt_context(conn, ctx, card, new, vec, cfg)
            _, used = bot.prompt_assemble(card, ctx, new, parts, cfg.PROMPT_BUDGET)
            system = bot.text_count_tokens(bot.character_system_prompt(card))
            out[turn] = {"prompt_tokens": used, "full_history_tokens": full + system + bot.text_count_tokens(new)}
    return out


def _filesystem(path):
    """The type of the filesystem path is on (tmpfs makes every sync free, so the figures would say nothing)."""
    best, kind = "", "?"
    with contextlib.suppress(OSError):
        for line in open("/proc/mounts"):
            mount, fs = line.split()[1:3]
            if str(Path(path).resolve()).startswith(mount) and len(mount) > len(best):
                best, kind = mount, fs
    return kind


def bench_durable_write(embedder, tmpdir, runs=200):
    """What a memory write the user is told is saved costs: median ms of a 记住 through memory_remember, whose
    transaction commits with synchronous=FULL, against the same with NORMAL; and of one bare insert in
    db_tx(durable=True) against durable=False. On a file database in tmpdir."""
    conn = bot.db_connect(Path(tmpdir) / "durable.db")
    if embedder.model is not None:
        bot.db_vec_prepare(conn, embedder.name, embedder.dim)
    vec = lambda text: embedder.encode([text])[0] if embedder.model is not None else None
    serial = itertools.count()

    def remember():
        n = next(serial)
        ctx = bot.Ctx(user_id=str(20_000 + n % 10), session=f"p:{20_000 + n % 10}", character_id="assistant")
        bot.memory_remember(conn, ctx, f"我的第{n}个暗号是{random.Random(n).randrange(10 ** 8)}", vec)

    def insert(durable):
        with bot.db_tx(conn, durable=durable):
            bot.memory_insert(conn, None, user_id="30000", text=f"事务测试第{next(serial)}条")

    def median_ms(fn):
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1000)
        return round(statistics.median(times), 3)

    out = {"filesystem": _filesystem(tmpdir), "runs": runs, "remember_full_ms": median_ms(remember)}
    durable_tx = bot.db_tx
    bot.db_tx = lambda conn, durable=False: durable_tx(conn, durable=False)  # memory_remember, but NORMAL
    try:
        out["remember_normal_ms"] = median_ms(remember)
    finally:
        bot.db_tx = durable_tx
    out["insert_full_ms"] = median_ms(lambda: insert(True))
    out["insert_normal_ms"] = median_ms(lambda: insert(False))
    out["remembered"] = conn.execute("SELECT count(*) FROM memories WHERE user_id != '30000'").fetchone()[0]
    conn.close()
    return out


def bench_forget(tmpdir, sizes=(1_000, 100_000), runs=5):
    """What a 忘记 costs as one user's history grows: median ms of forgetting one memory (memory_redact finding what
    says it through the FTS indexes, the rewrite, the durable commit) in a private chat of n varied messages (a
    twentieth of them summarised), for memories that chat says often (我对花粉过敏 …) and never (我在吃抗抑郁药)."""
    out = {}
    for n in sizes:
        conn = bot.db_connect(Path(tmpdir) / f"forget{n}.db")
        rng = random.Random(n)
        texts = _bench_texts(rng, n)
        with bot.db_tx(conn):
            conn.executemany("INSERT INTO messages (session, user_id, speaker, role, character_id, text, created_at) "
                             "VALUES ('p:1', '1', '阿明', ?, 'assistant', ?, ?)",
                             [("user" if i % 2 == 0 else "assistant", t, 1.7e9 + i) for i, t in enumerate(texts)])
            conn.executemany("INSERT INTO summaries (session, character_id, first_msg, last_msg, text, method, created_at)"
                             " VALUES ('p:1', 'assistant', ?, ?, ?, 'llm', 0)",
                             [(i, i + 19, "此前，" + "。".join(texts[i:i + 4]) + "。") for i in range(0, n, 20)])
        ctx = bot.Ctx(user_id="1", session="p:1", character_id="assistant")
        for label, memories in (("often", [f"我对{a}过敏" for a in ("花粉", "尘螨", "牛奶", "猫毛", "海鲜")]),
                                ("never", [f"我在吃第{i}种抗抑郁药" for i in range(runs)])):
            times = []
            for text in memories[:runs]:
                fact = bot.memory_fact(text)
                with bot.db_tx(conn):
                    mid = bot.memory_insert(conn, None, user_id="1", text=text, subject=fact.subject,
                                            attribute=fact.attribute, value=fact.value)
                row = conn.execute("SELECT * FROM memories WHERE id = ?", (mid,)).fetchone()
                t0 = time.perf_counter()
                bot._forget_rows(conn, ctx, [row])
                times.append((time.perf_counter() - t0) * 1000)
            out[f"{n} messages, said {label}_ms"] = round(statistics.median(times), 1)
        out[f"{n} messages, rewritten"] = conn.execute("SELECT count(*) FROM messages WHERE text = ?",
                                                        (bot.FORGOTTEN_TEXT,)).fetchone()[0]
        conn.close()
    return out


def _wipe_database(path, total=100_000, mine=10_000, memories=300, users=100):
    """A database of total messages, mine of them said by or to user '1' (half in their private chat, half in three
    groups among the others' lines), a summary every 20 messages of each chat, and memories of theirs."""
    conn = bot.db_connect(path)
    rng = random.Random(total)
    texts = _bench_texts(rng, total)
    rows = []
    for i, t in enumerate(texts):  # a line and the reply to it, pair by pair
        turn = i // 2
        if turn % (total // mine) == 0:
            user, session = "1", "p:1" if turn // 10 % 2 == 0 else f"g:{turn // 20 % 3}"
        else:
            user = str(2 + turn % users)
            session = f"g:{turn % 3}" if turn % 4 == 1 else f"p:{user}"
        rows.append((session, user, "阿明" if user == "1" else f"群友{user}", "user" if i % 2 == 0 else "assistant", t,
                     1.7e9 + i))
    with bot.db_tx(conn):
        conn.executemany("INSERT INTO messages (session, user_id, speaker, role, character_id, text, created_at) "
                         "VALUES (?, ?, ?, ?, 'assistant', ?, ?)", rows)
        for (session,) in conn.execute("SELECT DISTINCT session FROM messages").fetchall():
            ids = [r[0] for r in conn.execute("SELECT id FROM messages WHERE session = ? ORDER BY id", (session,))]
            conn.executemany("INSERT INTO summaries (session, character_id, first_msg, last_msg, text, method, "
                             "created_at) VALUES (?, 'assistant', ?, ?, ?, 'llm', 0)",
                             [(session, ids[i], ids[min(i + 19, len(ids) - 1)],
                               "此前，" + "。".join(texts[j - 1] for j in ids[i:i + 4]) + "。")
                              for i in range(0, len(ids), 20)])
        for text in _bench_texts(rng, memories):
            fact = bot.memory_fact(text)
            bot.memory_insert(conn, None, user_id="1", text=fact.text, subject=fact.subject,
                              attribute=fact.attribute, value=fact.value)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def bench_wipe(tmpdir, runs=3):
    """What 忘记关于我的一切 costs: a user with 10k messages (and 300 memories) in a 100k-message database. The wipe
    runs as the bot runs it, memory_wipe_start and then memory_wipe_step until done, each a job of its own on the
    database thread: the longest job is how long another chat's reply may wait for it; the sum is the wipe.
    Medians of runs, each on a fresh copy. Also one 忘记 of that user (memory_redact) with and without the
    messages_user index (schema v6), which its per-user scans use."""
    import shutil
    base = Path(tmpdir) / "wipe-base.db"
    _wipe_database(base)
    longest, typical, total, steps, first, forget, forget_noindex = [], [], [], [], [], [], []
    for run in range(runs):
        path = Path(tmpdir) / f"wipe{run}.db"
        shutil.copy(base, path)
        conn = bot.db_connect(path)
        held = []
        t0 = time.perf_counter()
        n, plan = bot.memory_wipe_start(conn, "1")
        held.append((time.perf_counter() - t0) * 1000)
        done = False
        while not done:
            t0 = time.perf_counter()
            done = bot.memory_wipe_step(conn, plan)
            held.append((time.perf_counter() - t0) * 1000)
        left = conn.execute("SELECT count(*) FROM messages WHERE user_id = '1'").fetchone()[0]
        assert n == 300 and left <= 1, (n, left)  # the newest message of all may be theirs: it stays
        conn.close()
        longest.append(max(held))
        typical.append(statistics.median(held))
        total.append(sum(held))
        first.append(held[0])
        steps.append(len(held))
        for index, times in ((True, forget), (False, forget_noindex)):
            path = Path(tmpdir) / f"forget{run}{index}.db"
            shutil.copy(base, path)
            conn = bot.db_connect(path)
            if not index:
                conn.execute("DROP INDEX messages_user")
            row = conn.execute("SELECT * FROM memories WHERE user_id = '1' ORDER BY id LIMIT 1 OFFSET ?",
                               (run,)).fetchone()
            t0 = time.perf_counter()
            bot._forget_rows(conn, bot.Ctx(user_id="1", session="p:1", character_id="assistant"), [row])
            times.append((time.perf_counter() - t0) * 1000)
            conn.close()
    med = lambda xs: round(statistics.median(xs), 1)  # noqa: E731
    return {"database": "100k messages, the user's 10k (5k private, 5k in 3 groups), 300 memories",
            "wipe, longest hold of the database thread_ms": med(longest),
            "wipe, median hold_ms": med(typical), "wipe, first step_ms": med(first),
            "wipe, all steps_ms": med(total), "wipe, steps": med(steps),
            "one 忘记 of that user_ms": med(forget), "one 忘记 of that user, without messages_user_ms": med(forget_noindex)}


def _table_lines(rev=None):
    """Every line of tests/data/memory_commands.jsonl and memory_understanding.jsonl, as this checkout has them or
    (rev) as git revision rev had them."""
    lines = []
    for name in ("memory_commands.jsonl", "memory_understanding.jsonl"):
        text = (HERE / "data" / name).read_text(encoding="utf-8") if rev is None else subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:tests/data/{name}"], capture_output=True, check=True
        ).stdout.decode()
        for row in text.splitlines():
            if row.strip():
                obj = json.loads(row)
                lines += obj.get("lines") or obj.get("turns") or []
    return lines


def bench_memory_rules(runs=5):
    """The rules' path of the memory commands, LLM-free: median µs to read one message (memory_parse) over
    every line of tests/data/memory_commands.jsonl and memory_understanding.jsonl, best of runs passes."""
    lines = _table_lines()
    best = []
    for _ in range(runs):
        times = []
        for text in lines:
            t0 = time.perf_counter()
            bot.memory_parse(text)
            times.append((time.perf_counter() - t0) * 1e6)
        best.append(statistics.median(times))
    return {"messages": len(lines), "parse_median_us": round(min(best), 1)}


#: One side of --parse: a checkout's memory_parse over the lines (a JSON file), one pass per line read from stdin;
#: printed: the pass's median µs, and the median of each line's best µs so far. Each checkout has a process of its
#: own, driven in turn.
_PARSE_WORKER = """
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import bot
lines = json.loads(open(sys.argv[2] + "/lines.json", encoding="utf-8").read())
bests = [float("inf")] * len(lines)
for _ in sys.stdin:
    times = []
    for text in lines:
        t0 = time.perf_counter()
        bot.memory_parse(text)
        times.append((time.perf_counter() - t0) * 1e6)
    bests = list(map(min, bests, times))
    print(statistics.median(times), statistics.median(bests), flush=True)
"""


def bench_parse(against=None, lines_rev=None, passes=7):
    """The rules' speed, comparable between revisions: median µs of memory_parse over the table lines (this
    checkout's, or lines_rev's), best of passes passes, for this checkout and (against) git revision against's
    bot.py, each in a process of its own, their passes alternating (a busy machine slows both alike). Also the
    median of each line's best time over the passes: steadier when other work shares the machine."""
    lines = _table_lines(lines_rev)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "lines.json").write_text(json.dumps(lines, ensure_ascii=False), encoding="utf-8")
        checkouts = {"this checkout": ROOT}
        if against:
            other = Path(tmp) / "against"
            other.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", against], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(other)], input=archive.stdout, check=True)
            checkouts[against] = other
        workers = {name: subprocess.Popen([sys.executable, "-c", _PARSE_WORKER, str(folder), str(tmp)],
                                          cwd=folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                   for name, folder in checkouts.items()}
        medians = {name: [] for name in workers}
        try:
            for _ in range(passes):
                for name, worker in workers.items():
                    worker.stdin.write("\n")
                    worker.stdin.flush()
                    medians[name].append([float(x) for x in worker.stdout.readline().split()])
        finally:
            for worker in workers.values():
                worker.stdin.close()
                worker.wait()
    return {"messages": len(lines), "lines of": lines_rev or "this checkout", "passes": passes,
            **{f"{name}, parse_median_us": round(min(v[0] for v in values), 1) for name, values in medians.items()},
            **{f"{name}, median of line bests_us": round(values[-1][1], 1) for name, values in medians.items()}}


def bench_footprint(runs=3, shape=True):
    """tests/footprint.py's figures for EMBED_MODEL off, the test model and a default-shaped model:
    seconds to the ready line, idle and peak RSS, single sentences a second through Embedder.encode."""
    measured = footprint.measure(runs, shape)
    keep = ("ready_s", "first_answer_s", "idle_rss_mb", "peak_rss_mb", "encode_sentences_per_s", "loading_path")
    return {"runs": runs} | {label: {k: row[k] for k in keep if k in row}
                             for label, row in measured.items() if isinstance(row, dict)}


# The bot as a process: load, soak, crashes ###################################

def _start_bot(llm, tmpdir, db, model, **settings):
    """`python bot.py` with the fake LLM; returns (process, connected NapCat) once it is ready. A real start, not one
    forked from the tests' zygote: its memory and start time are what a user's `python bot.py` has."""
    env = {"LLM_BASE_URL": llm.url, "BOT_DB": str(Path(tmpdir) / db), "EMBED_MODEL": model or "off",
           "ONEBOT_PORT": free_port(), "BOT_LOG_LEVEL": "WARNING", "BOT_RATE_LIMIT": 0, "MEMORY_RATE_LIMIT": 0, "LLM_TIMEOUT": 20,
           "BOT_CHARACTERS": ROOT / "characters.json", **settings}
    proc = BotProcess(env, real=True).wait_ready()
    return proc, NapCat(proc.port)


def _latencies(nap, user_id, texts, timeout=10):
    """Milliseconds from each message to its reply, one message at a time."""
    out = []
    for text in texts:
        t0 = time.perf_counter()
        nap.event(user_id, text)
        got = nap.wait_replies(1, timeout)
        out.append((got[0][1] - t0) * 1000 if got else float("nan"))
    return out


def bench_load(tmpdir, model):
    """Reply latency, 30 users at once, a burst, a 10,000-message soak (RSS), summaries in flight, kill -9."""
    out = {}
    llm = FakeLLM()
    try:
        proc, nap = _start_bot(llm, tmpdir, "load.db", model)
        try:
            time.sleep(1)
            out["rss_idle_mb"] = round(_rss_mb(proc.proc.pid), 1)
            lat = _latencies(nap, 1, [f"第{i}条：今天想吃点什么好呢" for i in range(200)])  # an instant LLM
            out["reply_ms_instant_llm"] = {"p50": round(_pct(lat, 50), 1), "p95": round(_pct(lat, 95), 1)}
            llm.delay = 1.0  # 30 users at once, 1 s per LLM call
            t0 = time.perf_counter()
            for u in range(30):
                nap.event(100 + u, "你好，在吗？我想问个问题")
            got = nap.wait_replies(30, 30)
            out["30_users_1s_llm"] = {"answered": len(got),
                                      "all_answered_s": round(max(t for _, t in got) - t0, 2) if got else None}
            llm.delay = 0.05  # a burst of 300 messages from 100 users: what comes while one is answered is answered with it
            t0 = time.perf_counter()
            for i in range(300):
                nap.event(1000 + i % 100, f"连发{i}")
            got = nap.wait_replies(1, 120)
            while got and time.perf_counter() - t0 < 120:  # done when the bot is quiet for 2 s (50 ms per call)
                more = nap.wait_replies(1, 2.0)
                if not more:
                    break
                got += more
            out["burst_300_from_100"] = {"replies": len(got), "seconds": round(max((t for _, t in got), default=t0) - t0, 2)}
            llm.delay = 0.0  # the soak: 10,000 messages from 100 users, in waves
            samples, t0 = [], time.perf_counter()
            for wave in range(100):
                for u in range(100):
                    nap.event(5000 + u, f"第{wave}波：{_bench_texts(random.Random(wave * 100 + u), 1)[0]}，你觉得呢？")
                nap.wait_replies(100, 120)
                llm.requests.clear()  # the fake's own memory is not what is measured
                if wave in (9, 99):
                    samples.append(_rss_mb(proc.proc.pid))
            out["soak_10000"] = {"seconds": round(time.perf_counter() - t0, 1), "rss_after_1000_mb": round(samples[0], 1),
                                 "rss_after_10000_mb": round(samples[1], 1),
                                 "rss_growth_pct": round(100 * (samples[1] - samples[0]) / samples[0], 1)}
        finally:
            nap.close()
            proc.finish(signal.SIGTERM)
        conn = bot.db_connect(Path(tmpdir) / "load.db", create=False)
        out["stored_user_messages"] = conn.execute("SELECT count(*) FROM messages WHERE role = 'user'").fetchone()[0]
        conn.close()
        out["reply_with_summaries_in_flight"] = bench_summary_latency(tmpdir, llm, model)
        out["reply_while_another_floods"] = bench_floods(tmpdir, llm, model)
        out["crash"] = bench_crash(tmpdir, llm)
    finally:
        llm.close()
    return out


def _varied_chinese(rng, n):
    """n characters of varied Chinese (every bigram new): the worst case for tokenising and search."""
    return "".join(chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(n))


def _latencies_of(nap, user_id, texts, timeout=30):
    """Milliseconds from each of user_id's messages to its reply, while others' replies come too."""
    out = []
    for text in texts:
        t0 = time.perf_counter()
        nap.event(user_id, text)
        deadline, got = t0 + timeout, None
        while got is None and time.perf_counter() < deadline:
            for who, at in nap.wait_replies(1, max(0.0, deadline - time.perf_counter())):
                if who == user_id:
                    got = at
        out.append((got - t0) * 1000 if got else float("nan"))
    return out


def bench_flood(tmpdir, llm, model, llm_delay=1.0, messages=15, every=0.2, chars=4000):
    """Another user's reply time while one user floods with chars-character messages of varied Chinese
    (one every `every` seconds, far past BOT_RATE_LIMIT's default 20 a minute), against the same user's
    quiet reply time; both over the one NapCat connection. The LLM answers in llm_delay seconds."""
    import threading
    llm.delay = llm_delay
    proc, nap = _start_bot(llm, tmpdir, f"flood{llm_delay}.db", model, BOT_RATE_LIMIT=20, REPLY_SPLIT=0)
    try:
        questions = [f"第{i}个问题：{_bench_texts(random.Random(i), 1)[0]}，你怎么看？" for i in range(messages)]
        _latencies_of(nap, 4, questions[:2])  # warm up
        quiet = _latencies_of(nap, 2, questions)  # each phase its own user: neither passes BOT_RATE_LIMIT
        stop, sent, rng = threading.Event(), [0], random.Random(5)

        def flood():
            while not stop.is_set():
                nap.event(666, _varied_chinese(rng, chars))
                sent[0] += 1
                stop.wait(every)
        thread = threading.Thread(target=flood, daemon=True)
        thread.start()
        time.sleep(2)  # the flood is under way before the first question
        flooded = _latencies_of(nap, 3, questions)
        stop.set()
        thread.join()
        p50_quiet, p50_flood = statistics.median(quiet), statistics.median(flooded)
        return {"llm_delay_s": llm_delay, "flood_every_s": every, "flood_messages_sent": sent[0],
                "quiet_p50_ms": round(p50_quiet, 1), "flood_p50_ms": round(p50_flood, 1),
                "flood_p95_ms": round(_pct(flooded, 95), 1), "ratio_p50": round(p50_flood / p50_quiet, 2)}
    finally:
        nap.close()
        proc.finish(signal.SIGTERM)
        llm.delay = 0.0


def bench_floods(tmpdir, llm, model):
    """bench_flood with a 1 s and an instant LLM, flooding at 5 messages a second (past 3 x BOT_RATE_LIMIT most
    are dropped unstored), and at one every 1.1 s (under it: every one is stored and goes through the pipeline)."""
    runs = ((1.0, 0.2), (0.0, 0.2), (1.0, 1.1))
    return [bench_flood(tmpdir, llm, model, delay, every=every) for delay, every in runs]


def _group_reply(nap, user_id, timeout):
    """(perf_counter() when it came, its text) of the next reply in a group to user_id (a reply @-s its asker;
    replies to others pass by), or (None, '') after timeout seconds."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        got = nap.wait_replies(1, max(0.0, deadline - time.perf_counter()))
        if not got:
            break
        params = nap.sent.get(timeout=5)
        if any(s["type"] == "at" and s["data"]["qq"] == str(user_id) for s in params["message"]):
            return got[0][1], text_of(params).strip()
    return None, ""


def bench_group_flood(tmpdir, llm, model, llm_delay=1.0, burst=25, rounds=3, chars=4000):
    """A member's reply time in a group while another member of the same group has `burst` messages of chars
    characters waiting (sent at once; the victim asks once the first of them is answered), against the
    victim's quiet reply time in that group. Each round a new flooder and victim (BOT_RATE_LIMIT is per user),
    and the next round starts when the group is quiet again. The LLM answers in llm_delay seconds.
    BOT_GROUP_RATE_LIMIT is off: it caps how many messages a group gets a minute (three rounds of 25 pass its default
    60, and the third round would go unanswered by design), while this measures how long a reply waits."""
    llm.delay = llm_delay
    proc, nap = _start_bot(llm, tmpdir, "group_flood.db", model, BOT_RATE_LIMIT=20, BOT_GROUP_RATE_LIMIT=0,
                           REPLY_SPLIT=0)
    group, rng = 777, random.Random(7)
    try:
        quiet, flooded, turned_away = [], [], 0
        for i in range(rounds + 1):  # the first is a warm-up
            t0 = time.perf_counter()
            nap.event(300 + i, f"第{i}个安静的问题：{_bench_texts(random.Random(i), 1)[0]}", group_id=group, at_bot=True)
            at, _ = _group_reply(nap, 300 + i, 30)
            if i:
                quiet.append((at - t0) * 1000)
        for i in range(rounds):
            flooder, victim = 400 + i, 500 + i
            for _ in range(burst):
                nap.event(flooder, _varied_chinese(rng, chars), group_id=group, at_bot=True)
            for _ in range(burst + 1):  # past BOT_QUEUE_LIMIT some are told to wait at once; the first answer is an echo
                if "echo:" in _group_reply(nap, flooder, 60)[1]:
                    break
            else:
                raise RuntimeError("the flooder's first message was never answered")
            t0 = time.perf_counter()
            nap.event(victim, f"第{i}个群里的问题：{_bench_texts(random.Random(100 + i), 1)[0]}", group_id=group,
                      at_bot=True)
            at, text = _group_reply(nap, victim, 120)
            turned_away += "消息有点多" in text
            flooded.append((at - t0) * 1000 if at and "echo:" in text else float("nan"))
            while nap.wait_replies(1, max(3.0, 2 * llm_delay + 1)):  # the rest of the flood: quiet again
                nap.sent.get(timeout=5)
        answered = [x for x in flooded if x == x]
        p50_quiet, p50_flood = statistics.median(quiet), statistics.median(answered) if answered else float("nan")
        return {"llm_delay_s": llm_delay, "flood_burst": burst, "rounds": rounds, "victims_turned_away": turned_away,
                "quiet_p50_ms": round(p50_quiet, 1), "victim_p50_ms": round(p50_flood, 1),
                "victim_ms": [round(x) for x in flooded], "ratio_p50": round(p50_flood / p50_quiet, 2)}
    finally:
        nap.close()
        proc.finish(signal.SIGTERM)
        llm.delay = 0.0


def bench_reply_scale(tmpdir, model, runs=3, messages=200, sizes=(0, 100_000)):
    """Reply latency through QQ (fake LLM, instant) with 0 and with 100k memories of other users in the
    database, as a user has them right after `memory import`: the expansions of the whole import still
    to ask for. Each run starts the bot afresh on its own copy; p50 per run (the first 20 replies are
    warm-up), then the median of the runs."""
    import shutil
    embedder = bot.Embedder(model or "off")
    llm = FakeLLM()
    p50s = collections.defaultdict(list)
    try:
        for total in sizes:
            base = Path(tmpdir) / f"reply-{total}.db"
            conn = bot.db_connect(base)
            if embedder.model is not None:
                bot.db_vec_prepare(conn, embedder.name, embedder.dim)
            lines = [json.dumps({"user_id": str(10_000 + i // 100), "text": t}, ensure_ascii=False)
                     for i, t in enumerate(_bench_texts(random.Random(7), total))]
            bot.memory_import_rows(conn, embedder, lines)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
        for run in range(runs):
            for total in sizes:  # interleaved, so that a busy moment of the machine hits both alike
                for p in Path(tmpdir).glob("reply-run.db*"):
                    p.unlink()
                shutil.copy(Path(tmpdir) / f"reply-{total}.db", Path(tmpdir) / "reply-run.db")
                proc, nap = _start_bot(llm, tmpdir, "reply-run.db", model)
                try:
                    time.sleep(2)
                    lat = _latencies(nap, 999_999, [f"第{i}条：今天想吃点什么好呢" for i in range(messages)])
                    p50s[total].append(_pct(lat[20:], 50))
                finally:
                    nap.close()
                    proc.finish(signal.SIGTERM)
    finally:
        llm.close()
    out = {f"{total}_memories_p50_ms": round(statistics.median(p50s[total]), 1) for total in sizes}
    first, last = (statistics.median(p50s[t]) for t in (sizes[0], sizes[-1]))
    return out | {"added_ms": round(last - first, 1), "ratio": round(last / first, 2), "runs": runs,
                  "p50_per_run_ms": {str(t): [round(x, 1) for x in p50s[t]] for t in sizes}}


def bench_summary_latency(tmpdir, llm, model):
    """Reply latency (LLM 0.2 s) with no summaries, and with a 3-second summary started every 2 turns."""
    out = {}
    llm.delay, llm.summary_delay = 0.2, 3.0
    for name, every in (("no_summaries", 0), ("summary_every_2_turns_3s_each", 2)):
        proc, nap = _start_bot(llm, tmpdir, f"sum{every}.db", model, SUMMARY_EVERY=every)
        try:
            lat = _latencies(nap, 3, [f"第{i}个问题：{_bench_texts(random.Random(i), 1)[0]}，该怎么办？" for i in range(60)])
            out[name] = {"p50_ms": round(_pct(lat, 50), 1), "p95_ms": round(_pct(lat, 95), 1)}
        finally:
            nap.close()
            proc.finish(signal.SIGTERM)
    out["p50_change_pct"] = round(100 * (out["summary_every_2_turns_3s_each"]["p50_ms"] / out["no_summaries"]["p50_ms"] - 1), 1)
    llm.delay = llm.summary_delay = 0.0
    return out


def bench_crash(tmpdir, llm, rounds=5):
    """kill -9 while memories are being written: every acknowledged one must be there after."""
    acked, lost, bad = 0, 0, 0
    for r in range(rounds):
        proc, nap = _start_bot(llm, tmpdir, "crash.db", None)
        mine, i = [], 0
        deadline = time.perf_counter() + random.uniform(0.5, 2.0)
        while time.perf_counter() < deadline:
            nap.event(77, f"记住，我第{r}轮第{i}个暗号是暗号{r * 1000 + i}")  # a fact about the user: stored, not asked about
            if nap.wait_replies(1, 5):
                mine.append(f"暗号{r * 1000 + i}")
            i += 1
        nap.event(77, "记住，我发出这条后进程就被杀")  # in flight at the kill
        proc.kill()
        nap.close()
        conn = bot.db_connect(Path(tmpdir) / "crash.db", create=False)
        have = {row[0] for row in conn.execute("SELECT text FROM memories WHERE user_id = '77'")}
        bad += conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok"
        conn.close()
        acked += len(mine)
        lost += sum(not any(m in h for h in have) for m in mine)
    return {"rounds": rounds, "acknowledged": acked, "lost": lost, "integrity_failures": bad}


# main ###########################################################################

def bench_print(results, indent=""):
    for key, value in results.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            cols = list(value[0])
            print(f"{indent}{key}:")
            print(indent + "  " + "  ".join(f"{c:>14}" for c in cols))
            for row in value:
                print(indent + "  " + "  ".join(f"{str(row[c]):>14}" for c in cols))
        elif isinstance(value, dict):
            print(f"{indent}{key}:")
            bench_print(value, indent + "  ")
        elif isinstance(value, list):
            print(f"{indent}{key}:" + "".join(f"\n{indent}  {v}" for v in value))
        else:
            print(f"{indent}{key}: {value}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tests/bench.py", description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--load", action="store_true", help="only the load, soak and crash runs (bot, fake LLM, NapCat)")
    parser.add_argument("--flood", action="store_true",
                        help="only another user's reply time while one floods with 4,000-character messages "
                             "(another chat's user, and another member of the flooder's group)")
    parser.add_argument("--flood-group", action="store_true",
                        help="only the same-group case of --flood: a member's reply while another member floods")
    parser.add_argument("--forget", action="store_true", help="only what a 忘记 costs at 1k and 100k messages, "
                        "and 忘记关于我的一切 for a user with 10k messages of 100k")
    parser.add_argument("--reply", action="store_true", help="only the reply latency at 0 and 100k memories (bot, fake LLM)")
    parser.add_argument("--runs", type=int, default=3, help="runs of the reply latency at 0 and 100k memories (median)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, no LoCoMo: a quick look")
    parser.add_argument("--locomo", action="store_true", help="only LoCoMo recall (needs --data), model and keyword-only")
    parser.add_argument("--data", type=Path, help="folder of the public evaluation sets (memorybank/, locomo10.json)")
    parser.add_argument("--model", help="model2vec model id or folder (default: the test model, else EMBED_MODEL)")
    parser.add_argument("--footprint", action="store_true",
                        help="also run tests/footprint.py (builds a 500 MB model folder the first time; --quick: 1 run)")
    parser.add_argument("--tmp", type=Path, help="folder for the benchmark's databases (default: the system's temp folder)")
    parser.add_argument("--parse", action="store_true", help="only the rules' speed: memory_parse's median µs over the "
                        "memory tables' lines, best of --passes")
    parser.add_argument("--against", metavar="REV",
                        help="with --parse: also git revision REV's bot.py, passes alternating")
    parser.add_argument("--lines", metavar="REV", help="with --parse: the tables' lines as git revision REV had them "
                        "(default: this checkout's)")
    parser.add_argument("--passes", type=int, default=7,
                        help="with --parse: passes over the lines (the best one counts)")
    args = parser.parse_args(argv)
    if (args.against or args.lines) and not args.parse:
        parser.error("--against and --lines go with --parse")
    if args.parse:  # no model, no database: the rules alone
        results = {"memory_parse": bench_parse(args.against, args.lines, args.passes)}
        print(json.dumps(results, ensure_ascii=False, indent=2)) if args.json else bench_print(results)
        return
    if args.locomo and not (args.data and (args.data / "locomo10.json").exists()):
        parser.error("--locomo needs --data DIR, a folder with locomo10.json and locomo_recall.py")
    model = args.model or model_folder() or bot.config_load().EMBED_MODEL
    results = {"machine": f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, "
                          f"SQLite {bot._sqlite_module().sqlite_version}"}
    notes = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmpdir:
        if args.flood:
            llm = FakeLLM()
            try:
                results["reply_while_another_floods"] = bench_floods(tmpdir, llm, model)
                results["same_group_member_while_another_floods"] = bench_group_flood(tmpdir, llm, model)
            finally:
                llm.close()
        elif args.flood_group:
            llm = FakeLLM()
            try:
                results["same_group_member_while_another_floods"] = bench_group_flood(tmpdir, llm, model)
            finally:
                llm.close()
        if args.locomo:
            for name in (model, "off"):
                embedder = bot.Embedder(name)
                results[f"locomo ({'keyword-only' if embedder.model is None else name})"] = bench_locomo(
                    embedder, args.data / "locomo10.json")
        if args.forget:
            results["forget"] = bench_forget(tmpdir, runs=args.runs if args.runs != 3 else 5)
            results["wipe"] = bench_wipe(tmpdir, runs=args.runs)
        if args.reply or args.load:
            results["reply_at_scale"] = bench_reply_scale(tmpdir, model, runs=args.runs)
        if args.load:
            results["load"] = bench_load(tmpdir, model)
        elif not (args.reply or args.flood or args.flood_group or args.locomo or args.forget):
            embedder = bot.Embedder(model)
            results["model"] = f"{model} ({embedder.dim} dimensions)" if embedder.model is not None else f"none: {embedder.error}"
            results["rss_model_loaded_mb"] = round(_rss_mb(), 1)
            results["search"] = bench_search(embedder, tmpdir, quick=args.quick)
            results["rss_after_search_mb"] = round(_rss_mb(), 1)
            results["durable_write"] = bench_durable_write(embedder, tmpdir)
            results["memory_rules"] = bench_memory_rules()
            results["recall@5"] = bench_recall_sets(embedder)
            results["ooc_check"] = bench_ooc(HERE / "data" / "ooc_replies.jsonl", ROOT / "characters.json")
            data = args.data
            if data and (data / "memorybank" / "memory_bank_cn.json").exists():
                results["prompt_tokens"] = bench_prompt_growth(embedder, ROOT / "characters.json",
                                                               data / "memorybank" / "memory_bank_cn.json")
            else:
                notes.append("prompt_tokens skipped: give --data DIR with memorybank/memory_bank_cn.json")
            if args.quick:
                notes.append("locomo skipped: --quick")
            elif data and (data / "locomo10.json").exists():
                results["locomo"] = bench_locomo(embedder, data / "locomo10.json")
            else:
                notes.append("locomo skipped: give --data DIR with locomo10.json and locomo_recall.py")
        if args.footprint:
            results["footprint"] = bench_footprint(runs=1 if args.quick else 3)
    if notes:
        results["notes"] = notes
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=2))
    else:
        bench_print(results)


if __name__ == "__main__":
    main()
