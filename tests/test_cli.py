"""The command line as a user meets it: `python bot.py ...` in a subprocess. Every way it can go
wrong ends in one `Error: ... Fix: ...` line on stderr and exit 1, never a traceback, and leaves
what was there (the database, characters.json) as it was."""

import shutil
import socket
import sqlite3
import sys

import pytest

from conftest import assert_one_error_line
from fakes import ROOT, BotProcess, NapCat, free_port, run_bot


@pytest.fixture
def cli_env(tmp_path):
    """Settings pointing into tmp_path: no database yet, a copy of characters.json, no model, no LLM."""
    chars = tmp_path / "characters.json"
    shutil.copy(ROOT / "characters.json", chars)
    return {"BOT_DB": tmp_path / "bot.db", "BOT_CHARACTERS": chars, "EMBED_MODEL": "off",
            "LLM_BASE_URL": "http://127.0.0.1:9/v1", "ONEBOT_PORT": free_port()}


def made_db(env, tmp_path):
    """Creates the database at env's BOT_DB, through the CLI, with one memory in it."""
    src = tmp_path / "one.jsonl"
    src.write_text('{"user_id": "1", "text": "我住在北京"}\n', encoding="utf-8")
    p = run_bot("memory", "import", src, env=env)
    assert p.returncode == 0, p.stderr


# memory import / export ######################################################

@pytest.mark.parametrize("make, expected", [
    (lambda p: None, "no memories file at"),
    (lambda p: p.mkdir(), "is a folder, not a memories file"),
    (lambda p: p.write_bytes('{"user_id": "1", "text": "我住在北京"}\n'.encode("gbk")), "is not UTF-8 text"),
], ids=["missing", "folder", "not-utf8"])
def test_memory_import_of_a_file_it_cannot_read(cli_env, tmp_path, make, expected):
    path = tmp_path / "memories.jsonl"
    make(path)
    line = assert_one_error_line(run_bot("memory", "import", path, env=cli_env))
    assert expected in line and str(path.name) in line
    assert not cli_env["BOT_DB"].exists()  # nothing was made on the way


def test_memory_import_of_bad_lines_writes_nothing(cli_env, tmp_path):
    made_db(cli_env, tmp_path)
    src = tmp_path / "bad.jsonl"
    src.write_text('{"user_id": "1", "text": "好"}\n{"text": "没有用户"}\nnot json\n', encoding="utf-8")
    line = assert_one_error_line(run_bot("memory", "import", src, env=cli_env))
    assert "line 2" in line and "nothing imported" in line
    assert sqlite_rows(cli_env["BOT_DB"], "SELECT text FROM memories") == [("我住在北京",)]


def test_importing_an_export_twice_adds_nothing_the_second_time(cli_env, tmp_path):
    made_db(cli_env, tmp_path)
    src = tmp_path / "more.jsonl"
    src.write_text('{"user_id": "1", "text": "我对花生过敏"}\n{"user_id": "2", "text": "我住在上海"}\n'
                   '{"user_id": "2", "text": "你答应周五陪我练口语", "type": "experience", "character_id": "xiaoman"}\n',
                   encoding="utf-8")
    assert "imported 3 memories, skipped 0 already there" in run_bot("memory", "import", src, env=cli_env).stdout
    export = run_bot("memory", "export", env=cli_env)
    assert export.returncode == 0, export.stderr
    again = tmp_path / "export.jsonl"
    again.write_text(export.stdout, encoding="utf-8")
    p = run_bot("memory", "import", again, env=cli_env)
    assert p.returncode == 0 and "imported 0 memories, skipped 4 already there" in p.stdout, p.stdout + p.stderr
    src.write_text('{"user_id": "2", "text": "我住在上海", "scope": "public"}\n'  # another scope: another memory
                   '{"user_id": "3", "text": "我住在上海"}\n{"user_id": "1", "text": "我住在北京"}\n', encoding="utf-8")
    assert "imported 2 memories, skipped 1 already there" in run_bot("memory", "import", src, env=cli_env).stdout
    assert len(sqlite_rows(cli_env["BOT_DB"], "SELECT id FROM memories")) == 6


def test_an_export_with_a_group_fact_imports_back(cli_env, tmp_path):
    """Found by a hostile retest: export writes a 记住本群… fact as type group_fact, and import refused the whole
    file for it ('type must be user_fact or experience'): a database with one could not be moved or restored."""
    made_db(cli_env, tmp_path)
    src = tmp_path / "group.jsonl"
    src.write_text('{"user_id": "901", "text": "本群每周五晚上九点开黑", "type": "group_fact", "scope": "g:66", '
                   '"subject": "本群"}\n{"user_id": "1", "text": "我对花生过敏"}\n', encoding="utf-8")
    assert "imported 2 memories" in run_bot("memory", "import", src, env=cli_env).stdout
    export = run_bot("memory", "export", env=cli_env)
    assert '"type": "group_fact"' in export.stdout and '"scope": "g:66"' in export.stdout
    again = tmp_path / "export.jsonl"
    again.write_text(export.stdout, encoding="utf-8")
    fresh = dict(cli_env, BOT_DB=str(tmp_path / "fresh.db"))
    made = run_bot("memory", "import", again, env=fresh)
    lines = len(export.stdout.splitlines())
    assert made.returncode == 0 and f"imported {lines} memories" in made.stdout, made.stdout + made.stderr
    assert sqlite_rows(fresh["BOT_DB"], "SELECT type, scope, text FROM memories WHERE type = 'group_fact'") == \
        [("group_fact", "g:66", "本群每周五晚上九点开黑")]
    src.write_text('{"user_id": "7", "text": " 我喜欢猫 "}\n{"user_id": "7", "text": "我喜欢猫"}\n', encoding="utf-8")
    assert "imported 1 memories, skipped 1 already there" in run_bot("memory", "import", src, env=cli_env).stdout
    assert sqlite_rows(cli_env["BOT_DB"], "SELECT text FROM memories WHERE user_id = '7'") == [("我喜欢猫",)]
    src.write_text('{"user_id": "901", "text": "本群每周五开黑", "type": "group_fact"}\n', encoding="utf-8")
    line = assert_one_error_line(run_bot("memory", "import", src, env=cli_env))
    assert "line 1: a group_fact needs the scope g:<group>" in line


def test_memory_export_without_a_database(cli_env):
    line = assert_one_error_line(run_bot("memory", "export", env=cli_env))
    assert "no database at" in line and "BOT_DB" in line
    assert not cli_env["BOT_DB"].exists()


# backup ######################################################################

def test_backup_into_a_folder_that_does_not_exist(cli_env, tmp_path):
    made_db(cli_env, tmp_path)
    target = tmp_path / "no" / "such" / "folder" / "copy.db"
    line = assert_one_error_line(run_bot("backup", target, env=cli_env))
    assert "no folder" in line and "mkdir -p" in line
    assert not target.parent.exists()


def test_backup_onto_an_existing_file_leaves_it_alone(cli_env, tmp_path):
    made_db(cli_env, tmp_path)
    target = tmp_path / "old-backup.db"
    target.write_bytes(b"yesterday's backup")
    line = assert_one_error_line(run_bot("backup", target, env=cli_env))
    assert "already exists" in line
    assert target.read_bytes() == b"yesterday's backup"


def test_backup_without_a_database(cli_env, tmp_path):
    line = assert_one_error_line(run_bot("backup", tmp_path / "copy.db", env=cli_env))
    assert "no database at" in line
    assert not (tmp_path / "copy.db").exists()


# the database and characters.json the bot is pointed at #######################

@pytest.mark.parametrize("command", [["memory", "export"], ["chat"]])
def test_bot_db_that_is_not_a_database(cli_env, command):
    cli_env["BOT_DB"].write_text("these are my notes, not a database\n", encoding="utf-8")
    line = assert_one_error_line(run_bot(*command, env=cli_env, stdin=""))
    assert str(cli_env["BOT_DB"]) in line and "not a database" in line
    assert cli_env["BOT_DB"].read_text(encoding="utf-8") == "these are my notes, not a database\n"


def test_bot_db_in_a_folder_that_does_not_exist(cli_env, tmp_path):
    env = dict(cli_env, BOT_DB=tmp_path / "missing" / "bot.db")
    line = assert_one_error_line(run_bot("chat", env=env, stdin=""))
    assert "missing/bot.db" in line and "unable to open" in line


def test_bot_db_that_is_another_programs_database(cli_env):
    sqlite3.connect(cli_env["BOT_DB"]).execute("CREATE TABLE notes (x)")
    line = assert_one_error_line(run_bot("memory", "export", env=cli_env))
    assert "not Mnemo's" in line


@pytest.mark.parametrize("make, expected", [
    (lambda p: p.unlink(), "no characters file at"),
    (lambda p: (p.unlink(), p.mkdir()), "is a folder, not a characters file"),
    (lambda p: p.write_bytes(p.read_text(encoding="utf-8").encode("gbk", "replace")), "is not UTF-8 text"),
], ids=["missing", "folder", "not-utf8"])
def test_characters_file_it_cannot_read(cli_env, make, expected):
    make(cli_env["BOT_CHARACTERS"])
    line = assert_one_error_line(run_bot("chat", env=cli_env, stdin=""))
    assert expected in line and "characters.json" in line


@pytest.mark.parametrize("key,value,expect", [
    ("LLM_BASE_URL", "api.deepseek.com", "LLM_BASE_URL must start with http"),
    ("ONEBOT_PORT", "99999", "ONEBOT_PORT must be 1-65535"),
    ("ONEBOT_PORT", "abc", "ONEBOT_PORT must be a whole number"),
    ("LLM_TIMEOUT", "soon", "LLM_TIMEOUT must be a number"),
    ("BOT_SUPERUSERS", "alice", "BOT_SUPERUSERS takes QQ numbers"),
    ("LLM_API_KEY", "sk-你的密钥", "LLM_API_KEY has characters other than ASCII"),  # the README's placeholder, pasted
])
def test_bad_setting(cli_env, key, value, expect):
    line = assert_one_error_line(run_bot(env=dict(cli_env, **{key: value}), timeout=30))
    assert line.startswith("Error: " + expect)
    assert not cli_env["BOT_DB"].exists()


def test_dotenv_beside_bot_py_is_read_without_quotes(tmp_path, llm):
    """The .env a DeepSeek user writes reaches the LLM as `Bearer sk-...`, not `Bearer "sk-..."`."""
    for name in ("bot.py", "schema.sql", "characters.json"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / ".env").write_text(f'LLM_API_KEY="sk-0123456789abcdef"   # deepseek\nexport LLM_BASE_URL={llm.url}\n'
                                   f"EMBED_MODEL=off\nBOT_DB=./bot.db\n", encoding="utf-8")
    p = run_bot("doctor", env={}, script=tmp_path / "bot.py")
    assert "ok    LLM endpoint" in p.stdout, p.stdout + p.stderr
    assert "ok    embedding model: off" in p.stdout and "FAIL" not in p.stdout  # EMBED_MODEL=off is a choice
    assert [r["headers"]["Authorization"] for r in llm.requests] == ["Bearer sk-0123456789abcdef"]


def test_dotenv_that_is_not_utf8(tmp_path):
    shutil.copy(ROOT / "bot.py", tmp_path / "bot.py")
    (tmp_path / ".env").write_bytes("LLM_MODEL=通义千问\n".encode("gbk"))
    line = assert_one_error_line(run_bot(env={}, script=tmp_path / "bot.py"))
    assert ".env is not UTF-8 text" in line


# the command line itself #####################################################

@pytest.mark.parametrize("args, expected", [
    (["bogus"], "invalid choice: 'bogus'"),
    (["memory", "import"], "the following arguments are required: file"),
    (["memory"], "the following arguments are required: action"),
    (["chat", "--users", "1"], "unrecognized arguments: --users 1"),
])
def test_mistyped_command_line(cli_env, args, expected):
    line = assert_one_error_line(run_bot(*args, env=cli_env))
    assert expected in line and "--help" in line


def test_doctor_ends_with_one_error_line_when_a_check_fails(cli_env):
    p = run_bot("doctor", env=dict(cli_env, EMBED_MODEL="/nonexistent/model", LLM_TIMEOUT="0.5"))  # no retry waits
    line = assert_one_error_line(p)
    assert "2 of the checks failed" in line
    fails = [ln for ln in p.stdout.splitlines() if ln.startswith("FAIL")]
    assert len(fails) == 2 and all("Error:" in f and "Fix:" in f for f in fails), p.stdout


def test_python_without_the_packages(tmp_path):
    """`python3 bot.py` outside the virtual environment: the fix says how to make one."""
    import subprocess
    p = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "bot.py")], capture_output=True, text=True, timeout=30,
                       cwd=tmp_path)
    line = assert_one_error_line(p)
    assert "is not installed" in line and "python3 -m venv .venv" in line


def sqlite_rows(path, sql):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


# ONEBOT_HOST ##################################################################

@pytest.mark.parametrize("host", ["::1", "[::1]", "localhost"])
def test_a_loopback_host_in_any_spelling_starts_the_bot(cli_env, procs, llm, host):
    """Found by a hostile tester: ONEBOT_HOST=[::1] was read as a host name, and the Fix said the port was taken."""
    p = BotProcess(dict(cli_env, ONEBOT_HOST=host, LLM_BASE_URL=llm.url, LLM_API_KEY="sk-x"))
    procs.append(p)
    p.wait_ready()
    url = "ws://localhost" if host == "localhost" else "ws://[::1]"
    assert f"Mnemo ready: {url}:{cli_env['ONEBOT_PORT']}/ws/" in p.stdout  # the address NapCat is given works
    nc = NapCat(p.port, host="::1" if ":" in host else "127.0.0.1")
    try:
        assert nc.ask(1, "你好") == "echo:你好"
    finally:
        nc.close()


@pytest.mark.parametrize("host,expect,fix", [
    ("127.0.0.1:8080", "ONEBOT_HOST has a port in it", "set ONEBOT_HOST=127.0.0.1 and ONEBOT_PORT=8080"),
    ("[::1]:8080", "ONEBOT_HOST has a port in it", "set ONEBOT_HOST=::1 and ONEBOT_PORT=8080"),
    ("ws://127.0.0.1:8080/ws/", "ONEBOT_HOST takes an address, not a URL", "set ONEBOT_HOST=127.0.0.1"),
    ("[::1", "ONEBOT_HOST=[::1 is not an address", "set ONEBOT_HOST=127.0.0.1"),
    ("no-such-host.invalid", "ONEBOT_HOST=no-such-host.invalid is no address of this machine", "ONEBOT_HOST=127.0.0.1"),
    ("192.0.2.1", "ONEBOT_HOST=192.0.2.1 is no address of this machine", "ONEBOT_HOST=0.0.0.0"),
], ids=["port", "v6-port", "url", "bracket", "unknown-name", "not-this-machine"])
def test_a_bad_host_is_one_error_naming_the_fix(cli_env, host, expect, fix):
    line = assert_one_error_line(run_bot(env=dict(cli_env, ONEBOT_HOST=host, ONEBOT_ACCESS_TOKEN="t0ken-long-enough"),
                                         timeout=60))
    assert line.startswith("Error: " + expect) and fix in line, line
    assert "ONEBOT_PORT to another port" not in line  # the port was never the trouble


def test_a_port_in_use_names_the_port(cli_env):
    """`python bot.py` as typed (not the tests' cached launch, fakes.bot_command): the commonest first-start error."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        line = assert_one_error_line(run_bot(env=dict(cli_env, ONEBOT_PORT=port), timeout=60, real=True))
    assert f"127.0.0.1:{port}" in line and "is in use" in line and "ONEBOT_PORT" in line
