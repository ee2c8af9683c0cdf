"""What stands around the bot in the tests and in tests/bench.py: an OpenAI-compatible LLM server
on 127.0.0.1, a WebSocket client playing NapCat, and `python bot.py` run as a user runs it (from cached
bytecode and regexes, in a process forked from a Python that has imported its packages, the same main() and exit;
a few tests run the script itself: bot_command says which and why).
All real: real HTTP, a real WebSocket, a real process; nothing here reaches into bot.py's insides."""

import contextlib
import importlib.util
import io
import itertools
import json
import os
import queue
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import wsproto
import wsproto.events as wse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def bytecode_cache(source):
    """Compiles source once into its __pycache__ .pyc, checked by the source's hash (not its mtime), so every
    import of it, here and in `bot_command`'s processes, runs the bot.py on disk now without compiling its 860 KB
    again (~0.35 s a start). Example: bytecode_cache(ROOT / "bot.py") -> ".../__pycache__/bot.cpython-311.pyc"."""
    import py_compile
    pyc = importlib.util.cache_from_source(str(source))
    data = Path(source).read_bytes()
    with contextlib.suppress(OSError):
        head = Path(pyc).read_bytes()[:16]
        if head[:4] == importlib.util.MAGIC_NUMBER and head[4:8] == b"\x03\0\0\0" \
                and head[8:] == importlib.util.source_hash(data):
            return pyc
    return py_compile.compile(str(source), cfile=pyc, doraise=True,
                              invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)


#: bot.py's regexes as this Python's re compiler made them at the import below, for `bot_command`'s processes:
#: {(pattern, flags): _sre.compile's arguments, the code as bytes}, beside the .pyc (regex_recorder, _LAUNCH).
REGEX_CACHE = Path(importlib.util.cache_from_source(str(ROOT / "bot.py"))).with_suffix(".regex")


@contextlib.contextmanager
def regex_recorder(into):
    """While open, every pattern the re module compiles is also put in into, as the arguments its compiler gave
    _sre.compile, the code list as bytes; only those that rebuild an equal pattern (same flags, code and text).
    Example: with regex_recorder(d): re.compile("a+") -> d[("a+", 0)][:2] == ("a+", 32)."""
    import _sre
    import array
    import re
    compiler, last = re._compiler, []

    class Recording:
        def __getattr__(self, name):
            return getattr(_sre, name)

        def compile(self, *args):
            last.append(args)
            return _sre.compile(*args)

    def compile(p, flags=0):
        last.clear()
        pattern = original(p, flags)
        if isinstance(p, (str, bytes)) and len(last) == 1 and not flags & re.DEBUG:
            a = last[0]
            kept = (a[0], int(a[1]), array.array("I", a[2]).tobytes(), int(a[3]), dict(a[4]), tuple(a[5]))
            if _sre.compile(kept[0], kept[1], array.array("I", kept[2]).tolist(), *kept[3:]) == pattern:
                into[p, int(flags)] = kept
        return pattern

    original = compiler.compile
    if _sre.CODESIZE == array.array("I").itemsize:
        compiler.compile, compiler._sre = compile, Recording()
    try:
        yield into
    finally:
        compiler.compile, compiler._sre = original, _sre


bytecode_cache(ROOT / "bot.py")
with regex_recorder({}) as _regexes:
    import bot  # noqa: E402
if _regexes:  # (empty if bot was imported before this module)
    import _sre
    import marshal
    _part = REGEX_CACHE.with_suffix(f".{os.getpid()}")
    _part.write_bytes(marshal.dumps((sys.version, _sre.MAGIC, _regexes)))
    os.replace(_part, REGEX_CACHE)


def model_folder():
    """The real 64-d int8 model2vec model shipped in tokenlearn-static-model (x86_64 wheels only), or None."""
    spec = importlib.util.find_spec("static_model")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    return str(path) if path.exists() else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(fn, timeout=10.0):
    """fn()'s first truthy value within timeout seconds, else its last (falsy) value: assert on it."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(0.05)


# The fake LLM ##############################################################

#: Every request body any FakeLLM received, when a list (conftest sets one per test and renders them after
#: it); None keeps nothing (tests/bench.py sends thousands).
SEEN = None


def system_part(messages, head):
    """The part of a prompt's one system message that starts with head (parts are separated by a blank
    line: card and rules, 参考资料, 群里刚才的聊天, the follow-up note), or None."""
    text = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    start = 0 if text.startswith(head) else text.find("\n\n" + head) + 2
    if start == 1:
        return None
    end = text.find("\n\n", start)
    return text[start:] if end < 0 else text[start:end]


def is_summary_request(body):
    """True for the bot's summary requests (their system prompt asks for a '此前' note)."""
    first = body["messages"][0]["content"]
    return isinstance(first, str) and "此前" in first and "笔记" in first


def is_vision_request(body):
    """True for a request with a picture in it (OpenAI content parts of type image_url)."""
    return any(isinstance(m["content"], list) and any(p.get("type") == "image_url" for p in m["content"])
               for m in body["messages"])


def is_expansion_request(body):
    """True for the bot's request for a memory's expansion (bot.EXPAND_PROMPT)."""
    return body["messages"][0]["content"] == bot.EXPAND_PROMPT


def is_profile_request(body):
    """True for the bot's request for a user's profile (bot.PROFILE_PROMPT)."""
    return body["messages"][0]["content"] == bot.PROFILE_PROMPT


def is_plan_request(body):
    """True for the bot's request for a memory plan (bot.MEMORY_PLAN_PROMPT: the LLM as second reader)."""
    first = body["messages"][0]["content"]
    return isinstance(first, str) and first == getattr(bot, "MEMORY_PLAN_PROMPT", None)


class FakeLLM:
    """An OpenAI-compatible chat server. Replies 'echo:<last user message>' unless scripted:
    script items are str (a reply), or dict(status=, headers=, body=, delay=, reply=, gate=a threading.Event
    the answer waits for).
    Summary requests take their items from summary_script and wait summary_delay; requests with a
    picture are answered vision_reply; a memory's expansion request gets expansions[memory text] (a reply, or a dict like a script item),
    else the memory's own words. answer(body), when set, is asked first: a script item, or None for the
    rules above. A script item may also set finish_reason and message (more fields of the
    reply's message, e.g. reasoning_content), and reply=None with exact=True for a null content.

    Like some servers: refused_params {name: what to send instead, or None} answers a request that has
    one as OpenAI answers max_tokens to its reasoning models; context_chars > 0 answers a request whose
    messages hold more characters as llama.cpp's llama-server answers a prompt longer than its context;
    template (a name in SERVER_TEMPLATES or CHAT_TEMPLATES) renders every request through that chat template and
    answers one it refuses as the server does: template_status 500 like llama-server --jinja, 400 like vLLM."""

    def __init__(self):
        self.requests = []
        self.script = []
        self.summary_script = []
        self.delay = 0.0
        self.summary_delay = 0.0
        self.vision_reply = "一只橘猫趴在键盘上"
        self.expansions = {}  # memory text -> the words the LLM lists for it
        self.profile_script = []  # replies to profile requests (str or a script item); none left: an echo
        self.answer = None  # body -> a script item or None (then the usual rules): a whole run's LLM at once
        self.refused_params = {}  # parameter -> the one to send instead (None: none), as OpenAI's o1 / gpt-5
        self.context_chars = 0  # prompts longer than this many characters are refused, as llama-server does
        self.template, self.template_status = None, 500  # the model's chat template, rendered as a server does
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
                summary = is_summary_request(body)
                with llm.lock:
                    llm.requests.append({"path": self.path, "headers": dict(self.headers), "json": body,
                                         "time": time.monotonic()})
                    if SEEN is not None:
                        SEEN.append(body)
                    script = llm.summary_script if summary else llm.script
                    item = llm.answer(body) if llm.answer else None
                    if item is None and is_expansion_request(body):
                        memory = body["messages"][-1]["content"].removeprefix("记忆：")
                        item = llm.expansions.get(memory, memory)
                        item = {"delay": 0, "exact": True} | ({"reply": item} if isinstance(item, str) else item)
                    elif item is None and is_profile_request(body):
                        item = llm.profile_script.pop(0) if llm.profile_script else None
                    elif item is None:
                        item = script.pop(0) if script else None
                    if is_vision_request(body):
                        item = llm.vision_reply
                    refusal = llm._provider_refusal(body)
                    if refusal is not None:
                        item = refusal
                    llm.inflight += 1
                    llm.max_inflight = max(llm.max_inflight, llm.inflight)
                try:
                    self._answer(body, item, summary)
                finally:
                    with llm.lock:
                        llm.inflight -= 1

            def _answer(self, body, item, summary):
                item = {"reply": item} if isinstance(item, str) else item or {}
                if "gate" in item:  # a threading.Event the test sets: the answer waits for it, other requests don't
                    item["gate"].wait(30)
                time.sleep(item.get("delay", llm.summary_delay if summary else llm.delay))
                if "body" in item:
                    payload = item["body"].encode() if isinstance(item["body"], str) else item["body"]
                else:
                    last = body["messages"][-1]["content"]
                    text = item.get("reply") if item.get("exact") else (
                        item.get("reply") or (f"此前，用户聊了：{last[:80]}" if summary else f"echo:{last}"))
                    message = {"role": "assistant", "content": text, **item.get("message", {})}
                    payload = json.dumps({"id": "x", "object": "chat.completion", "choices": [
                        {"index": 0, "message": message, "finish_reason": item.get("finish_reason", "stop")}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
                        ensure_ascii=False).encode()
                status = item.get("status", 200)
                head = [f"HTTP/1.1 {status} {'OK' if status < 400 else 'Error'}", "Content-Type: application/json",
                        f"Content-Length: {len(payload)}"] + [f"{k}: {v}" for k, v in item.get("headers", {}).items()]
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    # one write: headers and body in separate packets would wait on delayed ACKs (40 ms)
                    self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a bot killed mid-request (the crash tests) is not the server's problem

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        # shutdown() waits for the next poll: a short one keeps every test's teardown short
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def _provider_refusal(self, body):
        """The error a stricter server gives this request (refused_params, context_chars), or None."""
        for name, instead in self.refused_params.items():
            if name in body:
                use = f" Use '{instead}' instead." if instead else ""
                return {"status": 400, "body": json.dumps({"error": {
                    "message": f"Unsupported parameter: '{name}' is not supported with this model.{use}",
                    "type": "invalid_request_error", "param": name, "code": "unsupported_parameter"}})}
        if self.template:
            try:
                render_chat(self.template, body["messages"])
            except Exception as e:  # noqa: BLE001 - the server sends back whatever the template raised
                if self.template_status == 400:  # vLLM: BadRequestError, a top-level body
                    return {"status": 400, "body": json.dumps({"object": "error", "message": str(e),
                                                               "type": "BadRequestError", "param": None, "code": 400})}
                return {"status": 500, "body": json.dumps({"error": {"code": 500, "message": str(e),
                                                                     "type": "server_error"}})}
        size = sum(len(t) for m in body["messages"] for t in _texts(m))
        if self.context_chars and size > self.context_chars:
            return {"status": 400, "body": json.dumps({"error": {
                "code": 400, "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error", "n_prompt_tokens": size, "n_ctx": self.context_chars}})}
        return None

    def chat_requests(self, since=0):
        """Requests that were replies (not summaries, pictures, expansions or memory plans), from the since-th on."""
        return [r for r in self.requests[since:] if not is_summary_request(r["json"])
                and not is_vision_request(r["json"]) and not is_expansion_request(r["json"])
                and not is_profile_request(r["json"]) and not is_plan_request(r["json"])]

    def profile_requests(self):
        """Requests for a user's profile: the memories each was given, one string a request."""
        return [r["json"]["messages"][-1]["content"] for r in self.requests if is_profile_request(r["json"])]

    def plan_requests(self, since=0):
        """Requests for a memory plan (the LLM reading a memory request the rules could not settle), from the
        since-th request on."""
        return [r for r in self.requests[since:] if is_plan_request(r["json"])]

    def expansion_requests(self):
        """Requests for a memory's expansion: the memory texts, in order."""
        return [r["json"]["messages"][-1]["content"].removeprefix("记忆：") for r in self.requests
                if is_expansion_request(r["json"])]

    def vision_requests(self):
        """Requests that asked for a picture's description."""
        return [r for r in self.requests if is_vision_request(r["json"])]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# Chat templates: what a local server makes of a request ######################

#: The chat templates in tests/data/chat_templates/ and the special tokens their models' tokenizers define.
CHAT_TEMPLATES = {
    "mistralai-Mistral-Small-3.1-24B-Instruct-2503": {"bos_token": "<s>", "eos_token": "</s>"},
    "google-gemma-3-it": {"bos_token": "<bos>", "eos_token": "<eos>"},
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": {"bos_token": "<｜begin▁of▁sentence｜>",
                                                 "eos_token": "<｜end▁of▁sentence｜>"},
    "Qwen-Qwen3-0.6B": {"bos_token": None, "eos_token": "<|im_end|>"},
    "meta-llama-Llama-3.2-3B-Instruct": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
}
#: Templates a FakeLLM can render as its server's (FakeLLM.template) but that not every request must pass:
#: Gemma 1/2 refuse any system message, so the bot adapts when such a server says so.
SERVER_TEMPLATES = {"google-gemma-7b-it": {"bos_token": "<bos>", "eos_token": "<eos>"}}
#: Templates of models that read pictures: a request with one goes to VISION_MODEL, so only these render it.
VISION_TEMPLATES = ("mistralai-Mistral-Small-3.1-24B-Instruct-2503", "google-gemma-3-it")
_compiled = {}


def chat_template(name):
    """The template compiled as transformers' apply_chat_template compiles it (an immutable sandbox,
    trim_blocks and lstrip_blocks, the loopcontrols extension, raise_exception, strftime_now and a
    tojson that keeps non-ASCII). jinja2 is a test-only dependency, imported here only."""
    if name not in _compiled:
        import datetime
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message):
            raise jinja2.exceptions.TemplateError(message)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
        path = ROOT / "tests" / "data" / "chat_templates" / f"{name}.jinja"
        _compiled[name] = env.from_string(path.read_text(encoding="utf-8"))
    return _compiled[name]


def render_chat(name, messages):
    """The prompt text a server running that model makes of messages (add_generation_prompt=True).
    Raises jinja2's TemplateError where the template refuses them (the server answers 500)."""
    return chat_template(name).render(messages=messages, tools=None, documents=None, add_generation_prompt=True,
                                      **(CHAT_TEMPLATES.get(name) or SERVER_TEMPLATES[name]))


def _texts(message):
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text"]


def template_problems(body):
    """What goes wrong when each template renders a chat request: ['<template>: <why>'], [] when nothing.
    Every message's text must be in the rendered prompt (trimmed, as Llama's and Gemma's templates trim)."""
    problems = []
    names = VISION_TEMPLATES if is_vision_request(body) else CHAT_TEMPLATES
    for name in names:
        try:
            text = render_chat(name, body["messages"])
        except Exception as e:  # noqa: BLE001 - a template's refusal, whatever its type, is what we report
            problems.append(f"{name}: {type(e).__name__}: {e}")
            continue
        for n, message in enumerate(body["messages"]):
            for part in _texts(message):
                if part.strip() not in text:
                    problems.append(f"{name}: message {n} ({message['role']}) is not in the prompt: {part[:60]!r}")
    return problems


def request_kinds(body):
    """What a request of the bot is, for the count of rendered requests: a set of words."""
    if is_summary_request(body):
        return {"summary"}
    if is_expansion_request(body):
        return {"expansion"}
    if is_vision_request(body):
        return {"picture"}
    messages = body["messages"]
    system, turns = messages[0]["content"], messages[1:]
    if not isinstance(system, str) or messages[0]["role"] != "system":
        return {"other"}
    kinds = {"chat"}
    for word, marker in (("ambient", "【群里刚才的聊天】"), ("memories", "【关于用户】"), ("profile", "【用户画像】"),
                         ("summary-in-prompt", "【此前】"),
                         ("follow-up", "（距离上次聊天"), ("ooc-retry", "注意：你上一次的回复出戏了")):
        kinds |= {word} if marker in system else set()
    last = turns[-1]["content"] if turns else ""
    kinds |= {"poke"} if bot.POKE_TEXT in last else set()
    kinds |= {"picture-described"} if "[图片：" in last else set()
    kinds |= {"merged-turns"} if any("\n" in m["content"] for m in turns if m["role"] == "user") else set()
    return kinds


# Pictures, served as NapCat serves them ######################################

def png(width=2, height=2, rgb=(255, 128, 0)):
    """A small valid PNG of one colour."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


class PictureServer:
    """An HTTP server on 127.0.0.1 with files at /<name>: pictures[name] = (bytes, delay in seconds).
    hits counts the GETs of each name."""

    def __init__(self):
        self.pictures = {}
        self.hits = {}
        pics = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                name = self.path.lstrip("/")
                pics.hits[name] = pics.hits.get(name, 0) + 1
                data, delay = pics.pictures.get(name, (None, 0))
                time.sleep(delay)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    if data is None:
                        self.send_error(404)
                        return
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def url(self, name):
        return f"http://127.0.0.1:{self.server.server_address[1]}/{name}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# A WebSocket client playing NapCat ###########################################

class NapCat:
    """Connects to ws://127.0.0.1:PORT/ws/ (or another host) as a OneBot v11 implementation (Universal role),
    sends message events and answers the bot's API calls, recording every send_msg (and when it came)."""

    _ids = itertools.count(1000)

    def __init__(self, port, self_id="10001", token=None, path="/ws/", host="127.0.0.1"):
        self.self_id = self_id
        self.sent = queue.Queue()  # send_msg params, in order
        self.arrivals = queue.Queue()  # (user or group id, time.perf_counter()) of each send_msg
        self.sock = socket.create_connection((host, port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
        headers = [("X-Self-ID", self_id), ("X-Client-Role", "Universal"), ("User-Agent", "NapCat-test")]
        if token:
            headers.append(("Authorization", f"Bearer {token}"))
        netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self.sock.sendall(self.ws.send(wse.Request(host=netloc, target=path, extra_headers=headers)))
        self.status = None
        self._buf_lock = threading.Lock()
        self._text = ""
        deadline = time.time() + 10
        while self.status is None and time.time() < deadline:
            self._pump()
        if self.status != 101:
            self.sock.close()
            raise ConnectionRefusedError(f"handshake answered {self.status}")
        self.closed = False
        self.ack = True  # False: API calls get no answer (a NapCat that dies before confirming a send)
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
                self._text += ev.data
                if ev.message_finished:
                    text, self._text = self._text, ""
                    self._on_text(text)
            elif isinstance(ev, wse.Ping):
                self._answer(ev.response())
            elif isinstance(ev, wse.CloseConnection):
                self.closed = True

    def _loop(self):
        self.sock.settimeout(None)
        try:
            while not self.closed:
                self._pump()
        except (OSError, ConnectionError):
            self.closed = True

    def _send_raw(self, data):
        with self._buf_lock:
            self.sock.sendall(data)

    def _answer(self, event):
        """Sends what the reader thread owes the server (an API answer, a pong), unless the test closed the
        connection meanwhile: an answer racing close() is dropped, as a NapCat that is shutting down drops it."""
        with self._buf_lock:
            if self.ws.state is wsproto.connection.ConnectionState.OPEN:
                self.sock.sendall(self.ws.send(event))

    def _on_text(self, data):
        call = json.loads(data)
        if call.get("action") in ("send_msg", "send_private_msg", "send_group_msg"):
            params = call["params"]
            self.arrivals.put((params.get("group_id") or params.get("user_id"), time.perf_counter()))
            self.sent.put(params)
        if not self.ack:
            return
        self._answer(wse.TextMessage(json.dumps(
            {"status": "ok", "retcode": 0, "data": {"message_id": next(self._ids)}, "echo": call.get("echo")})))

    def event(self, user_id, text=None, *, group_id=None, message=None, fmt="array", nickname="测试用户", card="",
              at_bot=False, ascii_json=False, role="member"):
        """Sends a message event; text becomes a text segment (or a CQ-code string with fmt='string').
        card is the group card, role the member's (owner, admin, member).
        ascii_json sends \\u escapes, so a lone surrogate travels as NapCat sends it ('\\ud800')."""
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
              "font": 0, "sender": {"user_id": int(user_id), "nickname": nickname, "card": card}}
        if group_id:
            ev["group_id"] = int(group_id)
            ev["sender"]["role"] = role
        self._send_raw(self.ws.send(wse.TextMessage(json.dumps(ev, ensure_ascii=ascii_json))))
        return mid

    def poke(self, user_id, *, group_id=None, target_id=None):
        """Sends a poke notice as NapCat does (notify / poke); target_id defaults to the bot."""
        ev = {"time": int(time.time()), "self_id": int(self.self_id), "post_type": "notice", "notice_type": "notify",
              "sub_type": "poke", "user_id": int(user_id), "sender_id": int(user_id),
              "target_id": int(target_id or self.self_id),
              "raw_info": [{"type": "qq", "uid": "u_x"}, {"txt": "戳了戳", "type": "nor"}]}
        if group_id:
            ev["group_id"] = int(group_id)
        self._send_raw(self.ws.send(wse.TextMessage(json.dumps(ev, ensure_ascii=False))))

    def reply(self, timeout=15):
        """The next send_msg the bot made: its params (message is a segment list)."""
        return self.sent.get(timeout=timeout)

    def reply_text(self, timeout=15):
        return text_of(self.reply(timeout))

    def ask(self, user_id, text, **kw):
        self.event(user_id, text, **kw)
        return self.reply_text()

    def barrier(self, user_id, text=None, *, answer=None, **kw):
        """Sends a marker message and returns what the bot sent before the marker's answer: [] means the
        messages before it got no reply, known without waiting a fixed time. text/answer: a marker of your
        own and a part of its reply (default: a fresh word the fake LLM echoes back)."""
        marker = text or f"屏障{next(self._ids)}"
        self.event(user_id, marker, **kw)
        before = []
        while True:
            params = self.reply()
            if (answer or marker) in text_of(params):
                return before
            before.append(params)

    def wait_replies(self, n, timeout):
        """Up to n (user or group id, time) arrivals, waiting at most timeout seconds in all."""
        got, deadline = [], time.monotonic() + timeout
        while len(got) < n:
            try:
                got.append(self.arrivals.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                break
        return got

    def close(self):
        with contextlib.suppress(OSError):
            self._send_raw(self.ws.send(wse.CloseConnection(code=1000)))
            self.sock.close()
        self.closed = True


def text_of(params):
    """The text segments of a send_msg, joined."""
    return "".join(s["data"]["text"] for s in params["message"] if s["type"] == "text")


# `python bot.py` as a user runs it ###########################################

def _process_env(env):
    """This environment less every Mnemo setting, then env's: a test sets exactly what it means to."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(bot.CONFIG_PREFIXES)}
    full.update({"PYTHONIOENCODING": "utf-8", "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"})
    full.update({k: str(v) for k, v in env.items()})
    return full


def _cwd(env, script):
    cwd = Path(script).parent if script else Path(env.get("BOT_DB", ROOT / "x")).parent
    return cwd if cwd.is_dir() else ROOT


#: `python bot.py ARGS` less the compiling: bot.py is run as `python -m bot` runs it (runpy: __name__ "__main__",
#: __file__ ROOT/bot.py, sys.argv[1:] the args, its folder first on sys.path, so the same .env / characters.json /
#: bot.db defaults, the same `sys.exit(main())`, exit code, output and signal handling), but from the .pyc
#: bytecode_cache keeps (PYTHONDONTWRITEBYTECODE=1 here, and a script run by name never uses a .pyc). Nor are
#: bot.py's module-level regexes compiled again: the re module's compiler takes a pattern's code from REGEX_CACHE
#: (what it made of the same text at this run's `import bot`, checked equal there) and compiles the rest (~0.5 s CPU
#: a start, 450 patterns). What is left of a start is bot.py's imports (~0.45 s CPU), which the zygote below saves.
_LAUNCH = ("import runpy, sys; sys.path[0] = {root!r}; sys.dont_write_bytecode = False\n"
           "import _sre, array, marshal, re\n"
           "try:\n"
           "    version, magic, regexes = marshal.loads(open({regexes!r}, 'rb').read())\n"
           "except (OSError, ValueError, EOFError, TypeError):\n"
           "    version = magic = regexes = None\n"
           "if version == sys.version and magic == _sre.MAGIC:\n"
           "    def compile(p, flags=0, original=re._compiler.compile):\n"
           "        a = regexes.pop((p, flags), None) if isinstance(p, (str, bytes)) else None\n"
           "        return original(p, flags) if a is None else _sre.compile(\n"
           "            a[0], a[1], array.array('I', a[2]).tolist(), *a[3:])\n"
           "    re._compiler.compile = compile\n"
           "runpy.run_module('bot', run_name='__main__', alter_sys=True)")


def bot_command(args, script=None, real=False):
    """The command line that runs bot.py with args. real (or script, another copy of bot.py): `python bot.py ARGS`
    exactly as a user types it, kept for the tests of what a user sees at the very start and end (the ready line,
    an `Error: ... Fix: ...` line, Ctrl-C) and of a .env beside a copy; every other test takes _LAUNCH."""
    if real or script:
        return [sys.executable, str(script or ROOT / "bot.py"), *map(str, args)]
    return [sys.executable, "-c", _LAUNCH.format(root=str(ROOT), regexes=str(REGEX_CACHE)), *map(str, args)]


# A start without the imports: bot_command's processes forked from a zygote ########

#: The zygote: a Python that has imported the packages bot.py imports (not bot.py itself), run once a test run with
#: the environment every bot_command process starts from (_process_env({})); for each start it forks a child that
#: takes the start's stdin / stdout / stderr (passed over a Unix socket), cwd, environment and arguments, then runs
#: _LAUNCH and exits as `python -c` exits. Its own stdin is the test run's pipe: at EOF it ends.
_ZYGOTE_CODE = r"""
import atexit, json, os, random, select, signal, socket, struct, sys, threading, traceback
import argparse, asyncio, logging, sqlite3, ssl, httpx, numpy, aiocqhttp, hypercorn.asyncio, quart
try:
    import sqlean, sqlite_vec
except ImportError:
    pass
path = sys.argv[1]
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(path)
listener.listen(64)
children = {}

def child(req, fds, own):
    for conn in (listener, own, *children.values()):
        conn.close()
    for n, fd in enumerate(fds):
        os.dup2(fd, n)
        os.close(fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    random.seed()
    sys.argv = ["-c", *req["args"]]
    try:
        exec(compile(req["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else print(e.code, file=sys.stderr) or 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or 120
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)

print("ready", flush=True)
while True:
    ready = select.select([listener, sys.stdin], [], [], 0.02)[0]
    if sys.stdin in ready and not os.read(0, 1):
        break
    if listener in ready:
        conn = listener.accept()[0]
        data, fds = socket.recv_fds(conn, 1 << 16, 3)[:2]
        size = struct.unpack("I", data[:4])[0]
        while len(data) < size + 4:
            data += conn.recv(1 << 16)
        pid = os.fork()
        if pid == 0:
            child(json.loads(data[4:]), fds, conn)
        for fd in fds:
            os.close(fd)
        conn.sendall(struct.pack("i", pid))
        children[pid] = conn
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if not pid:
            break
        conn = children.pop(pid)
        conn.sendall(struct.pack("i", os.waitstatus_to_exitcode(status)))
        conn.close()
os.unlink(path)
os.rmdir(os.path.dirname(path))
"""
#: What a forked child differs from a real start in, so a start whose environment changes one is not forked: the
#: settings Python reads as it starts (a child has the zygote's), and the hash seed (one a test run, not one a start).
_STARTUP_VARS = ("PYTHON", "LANG", "LC_")
_zygote_lock = threading.Lock()
_zygote = []  # [(Popen, socket path)], or [None] when it could not start


def _zygote_path():
    """The zygote's socket, started on first use; None if it could not start (then starts are plain processes)."""
    with _zygote_lock:
        if not _zygote:
            import tempfile
            path = Path(tempfile.mkdtemp(prefix="mnemo-zygote-")) / "sock"
            proc = subprocess.Popen([sys.executable, "-c", _ZYGOTE_CODE, str(path)], env=_process_env({}), cwd=ROOT,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            ok = proc.stdout.readline() == b"ready\n"
            _zygote.append((proc, str(path)) if ok else None)
        return _zygote[0][1] if _zygote[0] else None


def _inherited_stdin():
    """A copy of this process's stdin, which a subprocess started without one inherits (/dev/null if closed)."""
    try:
        return os.dup(0)
    except OSError:
        return os.open(os.devnull, os.O_RDONLY)


class Forked:
    """A bot_command process the zygote forked, looked after as subprocess.Popen looks after its own: pid, poll,
    wait, send_signal, kill, returncode (-N when signal N ended it), stdout / stderr (binary pipes)."""

    def __init__(self, args, env, cwd, path, stdin=None):
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_fd = stdin if stdin is not None else _inherited_stdin()
        self.args, self.returncode = args, None
        self.conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.conn.connect(path)
            msg = json.dumps({"args": args, "env": env, "cwd": str(cwd), "code": _LAUNCH.format(
                root=str(ROOT), regexes=str(REGEX_CACHE))}).encode()
            socket.send_fds(self.conn, [struct.pack("I", len(msg)) + msg], [in_fd, out_w, err_w])
            self.pid = struct.unpack("i", self._recv(4))[0]
        finally:
            for fd in (in_fd, out_w, err_w):
                os.close(fd)
        self.stdout, self.stderr = open(out_r, "rb"), open(err_r, "rb")

    def _recv(self, n):
        data = b""
        while len(data) < n:
            more = self.conn.recv(n - len(data))
            if not more:
                raise RuntimeError("the zygote ended")
            data += more
        return data

    def poll(self):
        if self.returncode is None and select.select([self.conn], [], [], 0)[0]:
            self.wait()
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            if not select.select([self.conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = struct.unpack("i", self._recv(4))[0]
            self.conn.close()
        return self.returncode

    def send_signal(self, sig):
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self):
        self.send_signal(signal.SIGKILL)


def _forkable(env, script, real):
    """Whether a start may be forked from the zygote (see _STARTUP_VARS); the zygote's socket if so."""
    if real or script:
        return None
    base = _process_env({})
    if any(k.startswith(_STARTUP_VARS) and base.get(k) != v for k, v in env.items()):
        return None
    return _zygote_path()


def run_bot(*args, env, stdin=None, timeout=60, script=None, real=False):
    """Runs `python bot.py ARGS` to the end (see bot_command); returns the CompletedProcess (stdout and stderr as
    text). script: another copy of bot.py (one with a .env beside it)."""
    full = _process_env(env)
    path = _forkable(full, script, real)
    if path is None:
        return subprocess.run(bot_command(args, script, real), env=full, cwd=_cwd(env, script), input=stdin,
                              capture_output=True, text=True, encoding="utf-8", timeout=timeout)
    in_r, in_w = os.pipe() if stdin is not None else (None, None)
    proc = Forked(list(map(str, args)), full, _cwd(env, script), path, stdin=in_r)
    texts = {}

    def read(name, stream):  # text=True: utf-8, universal newlines
        with io.TextIOWrapper(stream, encoding="utf-8") as f:
            texts[name] = f.read()
    readers = [threading.Thread(target=read, args=a, daemon=True) for a in (("out", proc.stdout), ("err", proc.stderr))]
    for t in readers:
        t.start()
    if in_w is not None:
        with open(in_w, "w", encoding="utf-8") as f, contextlib.suppress(BrokenPipeError):
            f.write(stdin)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    for t in readers:
        t.join(30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, texts.get("out", ""), texts.get("err", ""))


class BotProcess:
    """`python bot.py ARGS` left running (see bot_command), its stdout and stderr collected line by line."""

    def __init__(self, env, *args, real=False):
        self.port = int(env.get("ONEBOT_PORT", 8080))
        full = _process_env(env)
        path = _forkable(full, None, real)
        self.proc = Forked(list(map(str, args)), full, _cwd(env, None), path) if path else subprocess.Popen(
            bot_command(args, real=real), env=full, cwd=_cwd(env, None), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out, self.err = [], []
        self.threads = [threading.Thread(target=self._read, args=(s, b), daemon=True)
                        for s, b in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for t in self.threads:
            t.start()

    @staticmethod
    def _read(stream, buf):
        for line in iter(stream.readline, b""):
            buf.append(line.decode("utf-8", "replace"))

    def wait_ready(self, timeout=60):
        """Returns once the bot printed its ready line; raises if it exited instead."""
        wait_for(lambda: any(line.startswith("Mnemo ready: ") for line in self.out) or self.proc.poll() is not None,
                 timeout)
        if self.proc.poll() is not None or not any(line.startswith("Mnemo ready: ") for line in self.out):
            raise RuntimeError(f"bot did not start:\n{self.stdout}\n{self.stderr}")
        return self

    def finish(self, sig=None, timeout=30):
        """Sends sig (if given and still running), waits for the exit; returns the exit code."""
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        for t in self.threads:
            t.join(5)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        return self.finish()

    @property
    def stdout(self):
        return "".join(self.out)

    @property
    def stderr(self):
        return "".join(self.err)


def v1_database(path):
    """A database as the first build (schema v1) wrote it, open, for migration tests."""
    import sqlite_vec
    old = bot._sqlite_module().connect(str(path))
    old.create_function("mnemo_tokens", 1, lambda s: " ".join(bot.text_tokens(s or "")))
    old.create_function("mnemo_owner", 1, bot.text_owner_token)
    old.enable_load_extension(True)
    sqlite_vec.load(old)
    old.executescript((ROOT / "tests" / "data" / "schema_v1.sql").read_text(encoding="utf-8"))
    return old
