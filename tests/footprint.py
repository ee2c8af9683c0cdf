#!/usr/bin/env python3
"""How much memory and time the whole bot needs with each embedding model: measured, never asserted.

    python tests/footprint.py                 # median of 3, JSON on stdout (about 5 minutes)
    python tests/footprint.py --runs 1 --skip-shape
    python tests/footprint.py --exactness 6000      # vectors against model2vec's own path (needs ~3 GB)

For each of EMBED_MODEL=off, the small test model (tokenlearn-static-model) and a folder shaped like
the default minishlab/potion-multilingual-128M (500,353 Unigram pieces x 256 float32, built here from
the test model's tokenizer.json because the hub may be out of reach), it starts `python bot.py` in a
child process with a fake LLM and a fake NapCat, and reports: seconds to the ready line, seconds to
the first answer, idle RSS (VmRSS) after a few messages, peak RSS (VmHWM), and, in another child,
how many single sentences a second Embedder.encode turns into vectors. The default-shaped model is
measured on its first start (the one-off preparation of the lean loader's cache) and on the starts
after it. `bench` can call main() / measure() and print the same JSON.
"""

import argparse
import asyncio
import importlib.util
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The default-shaped model ###################################################

#: Pieces and width of minishlab/potion-multilingual-128M.
SHAPE_PIECES = 500_353
SHAPE_DIM = 256
#: Bumped when shape_model() builds something different, so an old folder is rebuilt.
SHAPE_VERSION = 1
#: Where the 500 MB default-shaped folder is kept between runs.
SHAPE_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mnemo-footprint" / "potion-shape"


def test_model_folder():
    """The real 64-d int8 model2vec model shipped in tokenlearn-static-model, or None."""
    spec = importlib.util.find_spec("static_model")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    return path if path.exists() else None


def shape_model(dest=SHAPE_DIR, pieces=SHAPE_PIECES, dim=SHAPE_DIM, seed=11):
    """Builds (once) a model2vec folder shaped like the default model: the test model's tokenizer.json
    padded with pieces made by joining two of its pieces (scores drawn near the sum of theirs, so the
    new pieces are used), and a random float32 table. Returns the folder."""
    import numpy as np
    dest = Path(dest)
    stamp = dest / "footprint-shape.json"
    want = {"version": SHAPE_VERSION, "pieces": pieces, "dim": dim, "seed": seed}
    if stamp.exists() and json.loads(stamp.read_text()) == want:
        return dest
    source = test_model_folder()
    if source is None:
        raise RuntimeError("tokenlearn-static-model is not installed (x86_64 only): no tokenizer to build from")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tok = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    seen = {p for p, _ in vocab}
    rng = random.Random(seed)
    body = vocab[4:]  # the specials and the odd unk piece stay as they are
    while len(vocab) < pieces:
        (a, sa), (b, sb) = rng.choice(body), rng.choice(body)
        piece = a + (b[1:] if b.startswith("\u2581") and len(b) > 1 else b)
        if piece in seen:
            continue
        seen.add(piece)
        vocab.append([piece, sa + sb + rng.uniform(-1.0, 2.0)])
    (tmp / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    config = {"model_type": "model2vec", "architectures": ["StaticModel"], "tokenizer_name": "BAAI/bge-m3",
              "apply_pca": dim, "apply_zipf": True, "hidden_dim": dim, "seq_length": 1000000, "normalize": True}
    (tmp / "config.json").write_text(json.dumps(config, indent=4))
    nbytes = pieces * dim * 4
    header = json.dumps({"embeddings": {"dtype": "F32", "shape": [pieces, dim], "data_offsets": [0, nbytes]}}).encode()
    header += b" " * (-len(header) % 8)
    gen = np.random.default_rng(seed)
    with open(tmp / "model.safetensors", "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        for start in range(0, pieces, 16384):  # in blocks: building it must not need 500 MB of memory
            rows = min(16384, pieces - start)
            f.write((gen.standard_normal((rows, dim), dtype=np.float32) * 0.05).tobytes())
    (tmp / "footprint-shape.json").write_text(json.dumps(want))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


# A fake LLM and a fake NapCat ###############################################

class FakeLLM:
    """An OpenAI-compatible chat server on 127.0.0.1 that answers at once."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "好的，我记下了。"}}],
                                   "usage": {"total_tokens": 20}}).encode()
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                 + str(len(body)).encode() + b"\r\n\r\n" + body)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


async def napcat_chat(port, texts, timeout=60):
    """Plays NapCat on the bot's reverse WebSocket: sends texts one by one (private chat), waits for each
    reply. Returns the perf_counter time of the first reply."""
    import wsproto
    import wsproto.events as wse
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
    writer.write(ws.send(wse.Request(host=f"127.0.0.1:{port}", target="/ws/",
                                     extra_headers=[("X-Self-ID", "10001"), ("X-Client-Role", "Universal")])))
    replies, buf, first = asyncio.Queue(), [""], []

    async def read():
        while data := await reader.read(65536):
            ws.receive_data(data)
            for ev in ws.events():
                if isinstance(ev, wse.AcceptConnection):
                    replies.put_nowait("accepted")
                elif isinstance(ev, wse.Ping):
                    writer.write(ws.send(ev.response()))
                elif isinstance(ev, wse.TextMessage):
                    buf[0] += ev.data
                    if ev.message_finished:
                        call, buf[0] = json.loads(buf[0]), ""
                        writer.write(ws.send(wse.TextMessage(json.dumps(
                            {"status": "ok", "retcode": 0, "data": {"message_id": 1}, "echo": call.get("echo")}))))
                        if call.get("action") == "send_msg":
                            replies.put_nowait(time.perf_counter())
    task = asyncio.get_running_loop().create_task(read())
    try:
        await asyncio.wait_for(replies.get(), timeout)
        for seq, text in enumerate(texts, 1):
            writer.write(ws.send(wse.TextMessage(json.dumps(
                {"time": int(time.time()), "self_id": 10001, "post_type": "message", "message_type": "private",
                 "sub_type": "friend", "message_id": seq, "user_id": 42, "message": [{"type": "text", "data": {"text": text}}],
                 "raw_message": text, "font": 0, "sender": {"user_id": 42, "nickname": "u42"}}, ensure_ascii=False))))
            first.append(await asyncio.wait_for(replies.get(), timeout))
    finally:
        task.cancel()
        writer.close()
    return first[0]


# Measuring ##################################################################

#: What the fake user says: a fact to remember, then chat that searches the memory.
CHAT = ["记住：我住在杭州西湖边，对花生过敏", "我晚上吃什么好", "周末想去爬山，有推荐吗", "你记得我什么",
        "最近睡不好怎么办", "推荐几本书吧", "Taylor Swift 出新歌了吗", "我的猫不爱吃饭"]


def _status(pid):
    """VmRSS and VmHWM of a process, in MB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line[:5]] = int(line.split()[1]) / 1024
    return out["VmRSS"], out["VmHWM"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bot_start(model, cache_home, bot=ROOT / "bot.py", idle=2.0):
    """One whole-bot start: `python bot.py` with EMBED_MODEL=model and its caches under cache_home.
    Returns ready_s, first_answer_s (both from the start), idle and peak RSS in MB, and the log."""
    llm = FakeLLM()
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "ONEBOT_", "BOT_", "EMBED_", "MEMORY_"))}
        env.update({"EMBED_MODEL": model, "LLM_BASE_URL": llm.url, "LLM_API_KEY": "x", "ONEBOT_PORT": str(port),
                    "BOT_DB": str(Path(tmp) / "bot.db"), "BOT_CHARACTERS": str(ROOT / "characters.json"),
                    "XDG_CACHE_HOME": str(cache_home), "BOT_LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1"})
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, str(bot)], env=env, cwd=tmp, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        lines = []
        try:
            for line in proc.stdout:
                lines.append(line.rstrip())
                if line.startswith("Mnemo ready:"):
                    break
            else:
                raise RuntimeError("the bot did not start:\n" + "\n".join(lines[-20:]))
            ready = time.perf_counter() - t0
            threading.Thread(target=lambda: [lines.append(x.rstrip()) for x in proc.stdout], daemon=True).start()
            first = asyncio.run(napcat_chat(port, CHAT)) - t0
            time.sleep(idle)
            rss, hwm = _status(proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)
            llm.close()
    log = [x for x in lines if "embedding model" in x or "vector search" in x]
    return {"ready_s": round(ready, 2), "first_answer_s": round(first, 2), "idle_rss_mb": round(rss),
            "peak_rss_mb": round(hwm), "log": log}


_SPEED = r"""
import json, random, sys, time
sys.path.insert(0, sys.argv[1])
import bot
e = bot.Embedder(sys.argv[2])
assert e.model is not None, e.error
texts = bot._bench_texts(random.Random(0), 5000) if hasattr(bot, "_bench_texts") else [f"我住在北京第{i}号" for i in range(5000)]
best = 1e9
for _ in range(3):  # the best of three rounds: the machine is shared
    t = time.perf_counter()
    for s in texts:
        e.encode([s])
    best = min(best, time.perf_counter() - t)
print(json.dumps({"sentences_per_s": round(len(texts) / best), "path": getattr(e.model, "path_kind", "model2vec")}))
"""


def encode_speed(model, cache_home, bot=ROOT / "bot.py"):
    """Single sentences a second through Embedder.encode (a child process; the cache prepared already)."""
    env = dict(os.environ, XDG_CACHE_HOME=str(cache_home))
    out = subprocess.run([sys.executable, "-c", _SPEED, str(Path(bot).parent), model], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(runs=3, shape=True, bot=ROOT / "bot.py"):
    """The figures, each the median of `runs` starts. Returns a dict ready for JSON."""
    test = test_model_folder()
    models = [("off", "off")] + ([("test model", str(test))] if test else [])
    if shape:
        models.append(("default-shaped", str(shape_model())))
    results = {"machine": f"{os.cpu_count()} cores, {os.uname().machine}, Python {sys.version.split()[0]}",
               "bot": str(bot), "runs": runs}
    for label, model in models:
        with tempfile.TemporaryDirectory() as warm:
            kinds = ["first start", "second start"] if label == "default-shaped" else [""]
            samples = {kind: [] for kind in kinds}
            if model != "off":
                bot_start(model, warm, bot)  # the first start prepares the cache the later starts use
            for _ in range(runs):
                for kind in kinds:
                    if kind == "first start":  # an empty cache: the one-off preparation is part of this start
                        with tempfile.TemporaryDirectory() as cold:
                            samples[kind].append(bot_start(model, cold, bot))
                    else:
                        samples[kind].append(bot_start(model, warm, bot))
            for kind in kinds:
                row = {k: statistics.median(s[k] for s in samples[kind])
                       for k in ("ready_s", "first_answer_s", "idle_rss_mb", "peak_rss_mb")}
                row["log"] = samples[kind][0]["log"]
                if kind != "first start" and model != "off":
                    speeds = [encode_speed(model, warm, bot) for _ in range(runs)]
                    row["encode_sentences_per_s"] = statistics.median(s["sentences_per_s"] for s in speeds)
                    row["loading_path"] = speeds[0]["path"]
                results[f"{label} {kind}".strip()] = row
    return results


def exactness(model, n=5000, seed=11):
    """Max |difference| between the lean loader's vectors and model2vec's (quantize_to='int8'), both through
    Embedder's normalisation, on n generated texts (tests/test_embed.py's: emoji, rare CJK, mixed scripts,
    long texts, empty strings). Loads model2vec's path: for the default-shaped model that takes ~2.8 GB."""
    import numpy as np
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    import bot
    from test_embed import reference, texts, unit
    sample = texts(n, seed=seed)
    lean = bot.LeanModel(bot.embed_prepare(model))
    ours = unit(lean.encode(sample))
    theirs = unit(reference(model).encode(sample, use_multiprocessing=False))
    diff = np.abs(ours - theirs)
    return {"texts": n, "max_abs_diff": float(diff.max()), "bit_identical_rows": int((diff == 0).all(axis=1).sum()),
            "empty_texts": sum(1 for t in sample if not t.strip()), "longest_text": max(map(len, sample))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="starts per figure; the median is reported")
    parser.add_argument("--skip-shape", action="store_true", help="leave out the 500 MB default-shaped model")
    parser.add_argument("--bot", default=str(ROOT / "bot.py"), help="the bot.py to measure (e.g. another worktree's)")
    parser.add_argument("--build-shape", action="store_true", help="only build the default-shaped folder; print its path")
    parser.add_argument("--exactness", type=int, metavar="N", help="instead: compare vectors with model2vec's on N texts")
    args = parser.parse_args(argv)
    if args.build_shape:
        print(shape_model())
        return 0
    if args.exactness:
        test = test_model_folder()
        models = ([("test model", test)] if test else []) + ([] if args.skip_shape else [("default-shaped", shape_model())])
        print(json.dumps({label: exactness(str(path), args.exactness) for label, path in models}, indent=2))
        return 0
    print(json.dumps(measure(args.runs, not args.skip_shape, Path(args.bot)), ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
