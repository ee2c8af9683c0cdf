"""Real things for the tests: a database file in tmp_path, an OpenAI-compatible HTTP server on
127.0.0.1, the real aiocqhttp server run by bot.py, a WebSocket client playing NapCat, and the
small real model2vec model from the tokenlearn-static-model package."""

import asyncio
import importlib.util
import itertools
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import wsproto
import wsproto.events as wse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import bot  # noqa: E402


def pytest_report_header(config):
    mod = bot._sqlite_module()
    conn = mod.connect(":memory:")
    import sqlite_vec
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    return (f"SQLite {mod.sqlite_version} via {mod.__name__}, "
            f"sqlite-vec {conn.execute('select vec_version()').fetchone()[0]}, model: {model_folder() or 'none'}")


def pytest_terminal_summary(terminalreporter):
    counts = getattr(sys.modules.get("test_examples"), "COUNTS", None)
    if counts:
        terminalreporter.write_line(f"docstring examples: {counts['run']} run, {counts['skipped']} skipped")


def model_folder():
    """The real 64-d int8 model2vec model shipped in tokenlearn-static-model, or None."""
    spec = importlib.util.find_spec("static_model")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    return str(path) if path.exists() else None


@pytest.fixture(scope="session")
def model_path():
    path = model_folder()
    if path is None:
        pytest.skip("tokenlearn-static-model (x86_64 only) is not installed")
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The fake LLM #############################################################

class FakeLLM:
    """An OpenAI-compatible chat server. Replies 'echo:<last user message>' unless scripted:
    script items are str (a reply), or dict(status=, headers=, body=, delay=, reply=)."""

    def __init__(self):
        self.requests = []
        self.script = []
        self.summary_script = []
        self.delay = 0.0
        self.summary_delay = 0.0
        self.inflight = self.max_inflight = 0  # requests being answered at once
        self.lock = threading.Lock()
        llm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with llm.lock:
                    llm.requests.append({"path": self.path, "headers": dict(self.headers), "json": body})
                    is_summary = "此前" in body["messages"][0]["content"] and "笔记" in body["messages"][0]["content"]
                    queue_ = llm.summary_script if is_summary else llm.script
                    item = queue_.pop(0) if queue_ else None
                    llm.inflight += 1
                    llm.max_inflight = max(llm.max_inflight, llm.inflight)
                try:
                    self._answer(body, item, is_summary)
                finally:
                    with llm.lock:
                        llm.inflight -= 1

            def _answer(self, body, item, is_summary):
                delay = llm.summary_delay if is_summary else llm.delay
                if isinstance(item, str):
                    item = {"reply": item}
                item = item or {}
                time.sleep(item.get("delay", delay))
                status = item.get("status", 200)
                if "body" in item:
                    payload = item["body"].encode() if isinstance(item["body"], str) else item["body"]
                else:
                    last = body["messages"][-1]["content"]
                    text = item.get("reply") or (f"此前，用户聊了：{last[:80]}" if is_summary else f"echo:{last}")
                    payload = json.dumps({"id": "x", "object": "chat.completion", "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
                        ensure_ascii=False).encode()
                try:
                    self.send_response(status)
                    for k, v in item.get("headers", {}).items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def chat_requests(self):
        """Requests that were replies (not summaries)."""
        return [r for r in self.requests if not ("此前" in r["json"]["messages"][0]["content"]
                                                 and "笔记" in r["json"]["messages"][0]["content"])]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def llm():
    server = FakeLLM()
    yield server
    server.close()


@pytest.fixture
def env(tmp_path, llm, model_path):
    """Settings for one test: everything in tmp_path, the fake LLM, the real small model."""
    chars = tmp_path / "characters.json"
    shutil.copy(ROOT / "characters.json", chars)
    return {"LLM_BASE_URL": llm.url, "LLM_API_KEY": "sk-test-secret-key-123", "LLM_TIMEOUT": "5",
            "BOT_DB": str(tmp_path / "bot.db"), "BOT_CHARACTERS": str(chars), "ONEBOT_PORT": str(free_port()),
            "EMBED_MODEL": model_path, "BOT_SUPERUSERS": "42", "SUMMARY_EVERY": "10", "BOT_RATE_LIMIT": "0"}


def make_cfg(env):
    return bot.config_load(environ=env, dotenv="/nonexistent/.env")


# `python bot.py ...` as a user runs it ########################################

def run_bot(*args, env, stdin=None, timeout=60, script=None):
    """Runs `python bot.py ARGS` to the end with env's settings and none inherited from this
    shell; returns the CompletedProcess (stdout and stderr as text). script: another copy of bot.py."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(bot.CONFIG_PREFIXES)}
    full.update({"PYTHONIOENCODING": "utf-8", "HF_HUB_OFFLINE": "1"})
    full.update({k: str(v) for k, v in env.items()})
    cwd = Path(script).parent if script else Path(env.get("BOT_DB", ROOT / "x")).parent
    cwd = cwd if cwd.is_dir() else ROOT
    return subprocess.run([sys.executable, str(script or ROOT / "bot.py"), *map(str, args)], env=full, cwd=cwd,
                          input=stdin, capture_output=True, text=True, encoding="utf-8", timeout=timeout)


def assert_one_error_line(proc):
    """The way every CLI failure ends: exit 1, one `Error: ... Fix: ...` line on stderr, no traceback."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("Error: ") and " Fix: " in lines[0] and lines[0].endswith("."), lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    return lines[0]


# The bot, run for real in a thread ###########################################

class Runner:
    """bot.py's cli_run in its own thread and event loop, as `python bot.py` runs it."""

    def __init__(self, env):
        self.cfg = make_cfg(env)
        self.ready = threading.Event()
        self.error = None
        self.app = self.stop_event = self.loop = None
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()
        if not self.ready.wait(60):
            raise RuntimeError(f"bot did not start: {self.error}")
        if self.error:
            raise self.error

    def _main(self):
        def on_ready(app, stop):
            self.app, self.stop_event, self.loop = app, stop, asyncio.get_running_loop()
            self.ready.set()
        try:
            asyncio.run(bot.cli_run(self.cfg, ready=on_ready))
        except BaseException as e:  # noqa: BLE001 - reported to the test
            self.error = e
            self.ready.set()

    def call(self, coro_fn, timeout=30):
        """Runs coro_fn() on the bot's loop and returns its result."""
        return asyncio.run_coroutine_threadsafe(coro_fn(), self.loop).result(timeout)

    def db(self, fn):
        return self.call(lambda: self.app.db.run(fn))

    def stop(self):
        if self.loop and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(30)


@pytest.fixture
def runner(env):
    r = Runner(env)
    yield r
    r.stop()


# A WebSocket client playing NapCat ###########################################

class NapCat:
    """Connects to ws://127.0.0.1:PORT/ws/ as a OneBot v11 implementation (Universal role),
    sends message events and answers the bot's API calls, recording every send_msg."""

    _ids = itertools.count(1000)

    def __init__(self, port, self_id="10001", token=None, path="/ws/"):
        self.self_id = self_id
        self.sent = queue.Queue()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
        headers = [("X-Self-ID", self_id), ("X-Client-Role", "Universal"), ("User-Agent", "NapCat-test")]
        if token:
            headers.append(("Authorization", f"Bearer {token}"))
        self.sock.sendall(self.ws.send(wse.Request(host=f"127.0.0.1:{port}", target=path, extra_headers=headers)))
        self.status = None
        self._buf_lock = threading.Lock()
        deadline = time.time() + 10
        while self.status is None and time.time() < deadline:
            self._pump()
        if self.status != 101:
            self.sock.close()
            raise ConnectionRefusedError(f"handshake answered {self.status}")
        self.closed = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _pump(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        self.ws.receive_data(data)
        for ev in self.ws.events():
            if isinstance(ev, wse.AcceptConnection):
                self.status = 101
            elif isinstance(ev, wse.RejectConnection):
                self.status = ev.status_code
            elif isinstance(ev, wse.TextMessage):
                self._on_text(ev.data)
            elif isinstance(ev, wse.Ping):
                self._send_raw(self.ws.send(ev.response()))
            elif isinstance(ev, wse.CloseConnection):
                self.closed = True

    def _loop(self):
        self.sock.settimeout(None)
        try:
            while not self.closed:
                self._pump()
        except OSError:
            self.closed = True
        except ConnectionError:
            self.closed = True

    def _send_raw(self, data):
        with self._buf_lock:
            self.sock.sendall(data)

    def _send_json(self, obj):
        self._send_raw(self.ws.send(wse.TextMessage(json.dumps(obj, ensure_ascii=False))))

    def _on_text(self, data):
        call = json.loads(data)
        if call.get("action") in ("send_msg", "send_private_msg", "send_group_msg"):
            self.sent.put(call["params"])
        self._send_json({"status": "ok", "retcode": 0, "data": {"message_id": next(self._ids)}, "echo": call.get("echo")})

    def event(self, user_id, text=None, *, group_id=None, message=None, fmt="array", nickname="测试用户", at_bot=False):
        """Sends a message event; text becomes a text segment (or a CQ-code string with fmt='string')."""
        mid = next(self._ids)
        if message is None:
            message = ([{"type": "at", "data": {"qq": self.self_id}}] if at_bot else []) + \
                      [{"type": "text", "data": {"text": text}}]
        if fmt == "string":
            message = "".join(f"[CQ:at,qq={s['data']['qq']}]" if s["type"] == "at" else
                              s["data"]["text"].replace("&", "&amp;").replace("[", "&#91;").replace("]", "&#93;")
                              for s in message) if isinstance(message, list) else message
        ev = {"time": int(time.time()), "self_id": int(self.self_id), "post_type": "message",
              "message_type": "group" if group_id else "private", "sub_type": "normal" if group_id else "friend",
              "message_id": mid, "user_id": int(user_id), "message": message, "raw_message": str(message),
              "font": 0, "sender": {"user_id": int(user_id), "nickname": nickname, "card": ""}}
        if group_id:
            ev["group_id"] = int(group_id)
        self._send_json(ev)
        return mid

    def reply(self, timeout=15):
        """The next send_msg the bot made: its params (message is a segment list)."""
        return self.sent.get(timeout=timeout)

    def reply_text(self, timeout=15):
        params = self.reply(timeout)
        return "".join(s["data"]["text"] for s in params["message"] if s["type"] == "text")

    def ask(self, user_id, text, **kw):
        self.event(user_id, text, **kw)
        return self.reply_text()

    def nothing(self, wait=1.0):
        """True when the bot sends nothing within wait seconds."""
        try:
            self.sent.get(timeout=wait)
            return False
        except queue.Empty:
            return True

    def close(self):
        with __import__("contextlib").suppress(OSError):
            self._send_raw(self.ws.send(wse.CloseConnection(code=1000)))
            self.sock.close()
        self.closed = True


@pytest.fixture
def napcat(runner):
    client = NapCat(runner.cfg.ONEBOT_PORT)
    yield client
    client.close()
