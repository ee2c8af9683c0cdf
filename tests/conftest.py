"""Real things for the tests: a database file in tmp_path, an OpenAI-compatible HTTP server on
127.0.0.1 and a WebSocket client playing NapCat (both in fakes.py, shared with bench.py), the real
aiocqhttp server run by bot.py, and `python bot.py` as a subprocess.

Tests run keyword-only (EMBED_MODEL=off), as on a machine without the test model: only the tests of
vector search itself ask for the small real model2vec model of tokenlearn-static-model (x86_64
wheels only) through the model_path / env_vec fixtures, and skip, saying why, where it is missing."""

import asyncio
import collections
import json
import shutil
import sys
import threading
from pathlib import Path

import pytest

import fakes
from fakes import ROOT, FakeLLM, NapCat, free_port, model_folder
import bot


def pytest_report_header(config):
    mod = bot._sqlite_module()
    conn = mod.connect(":memory:")
    import sqlite_vec
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    return (f"SQLite {mod.sqlite_version} via {mod.__name__}, "
            f"sqlite-vec {conn.execute('select vec_version()').fetchone()[0]}, "
            f"model: {model_folder() or 'none (vector tests skip; the rest run keyword-only)'}")


#: Requests rendered through the chat templates in the whole run, by kind (fakes.request_kinds).
RENDERED = collections.Counter()


def pytest_terminal_summary(terminalreporter):
    if RENDERED:
        terminalreporter.write_line(f"chat templates: {RENDERED['all']} requests rendered through "
                                    f"{len(fakes.CHAT_TEMPLATES)} templates, none refused or dropped a message; "
                                    + ", ".join(f"{k} {n}" for k, n in sorted(RENDERED.items()) if k != "all"))
    counts = getattr(sys.modules.get("test_examples"), "COUNTS", None)
    if counts:
        terminalreporter.write_line(f"docstring examples: {counts['run']} run, {counts['skipped']} skipped")
    table = sys.modules.get("test_memory_commands")
    for line in table.summary_lines() if table else ():
        terminalreporter.write_line("memory_commands " + line)


@pytest.fixture(autouse=True)
def every_request_renders():
    """Every request the bot sent in the test, rendered through the chat templates of tests/data/chat_templates/
    the way a local server (llama.cpp, vLLM, Ollama) renders it: none may be refused or lose a message."""
    fakes.SEEN = []
    yield
    bodies, problems = fakes.SEEN, []
    fakes.SEEN = None
    for body in bodies:
        found = fakes.template_problems(body)
        problems += [f"{p}\n  request: {json.dumps(body['messages'], ensure_ascii=False)[:600]}" for p in found]
        RENDERED.update(fakes.request_kinds(body) | {"all"})
    assert not problems, "\n".join(problems[:5])


@pytest.fixture(scope="session")
def model_path():
    """For tests of vector search itself: the small real model, or a skip saying why."""
    path = model_folder()
    if path is None:
        pytest.skip("vector search test: tokenlearn-static-model (x86_64 wheels only) is not installed")
    return path


@pytest.fixture
def llm():
    server = FakeLLM()
    yield server
    server.close()


@pytest.fixture
def env(tmp_path, llm):
    """Settings for one test: everything in tmp_path, the fake LLM, keyword-only search."""
    chars = tmp_path / "characters.json"
    shutil.copy(ROOT / "characters.json", chars)
    return {"LLM_BASE_URL": llm.url, "LLM_API_KEY": "sk-test-secret-key-123", "LLM_TIMEOUT": "5",
            "BOT_DB": str(tmp_path / "bot.db"), "BOT_CHARACTERS": str(chars), "ONEBOT_PORT": str(free_port()),
            "EMBED_MODEL": "off", "BOT_SUPERUSERS": "42", "SUMMARY_EVERY": "10", "BOT_RATE_LIMIT": "0",
            "REPLY_SPLIT": "0"}  # one reply, one QQ message: test_groups.py turns splitting on


@pytest.fixture
def env_vec(env, model_path):
    """env with vector search on (the small real model)."""
    return dict(env, EMBED_MODEL=model_path)


def make_cfg(env):
    return bot.config_load(environ=env, dotenv="/nonexistent/.env")


def assert_one_error_line(proc):
    """The way every CLI failure ends: exit 1, one `Error: ... Fix: ...` line on stderr, no traceback."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("Error: ") and " Fix: " in lines[0] and lines[0].endswith("."), lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    return lines[0]


# The bot, run for real in a thread ###########################################

#: A new database as bot.db_connect makes it, made once a run: a Runner whose BOT_DB does not exist yet starts on a
#: copy (the schema script took ~25 ms of each of some 490 starts). Tests of making a database use db_connect or
#: `python bot.py` themselves.
_TEMPLATE = []


def new_database(path):
    """Puts a copy of a new, empty database (made once a run by bot.db_connect) at path."""
    if not _TEMPLATE:
        import tempfile
        made = Path(tempfile.mkdtemp(prefix="mnemo-template-")) / "bot.db"
        bot.db_connect(made).close()  # the last connection closed: the WAL is checkpointed into bot.db and removed
        _TEMPLATE.append(made)
    shutil.copyfile(_TEMPLATE[0], path)


class Runner:
    """bot.py's cli_run in its own thread and event loop, as `python bot.py` runs it; a BOT_DB that does not
    exist yet is a copy of a new database (new_database)."""

    def __init__(self, env):
        self.cfg = make_cfg(env)
        if not Path(self.cfg.BOT_DB).exists() and Path(self.cfg.BOT_DB).parent.is_dir():
            new_database(self.cfg.BOT_DB)
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

    def rows(self, sql, *args):
        """The rows of a query on the live database, as dicts."""
        return self.db(lambda c: [dict(r) for r in c.execute(sql, args)])

    def stop(self):
        if self.loop and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(30)


@pytest.fixture
def runner(env):
    r = Runner(env)
    yield r
    r.stop()


@pytest.fixture
def napcat(runner):
    client = NapCat(runner.cfg.ONEBOT_PORT)
    yield client
    client.close()


@pytest.fixture
def procs():
    """BotProcesses a test starts; killed at the end if still running."""
    started = []
    yield started
    for p in started:
        p.kill()
