"""Settings: .env parsed as python-dotenv / NoneBot users write it, then the environment, and
one `Error: ... Fix: ...` line for a setting that can't be used."""

import pytest

import bot

# (what the .env holds, what it must give); python-dotenv gives the same except where noted
DOTENV_CASES = [
    ('LLM_API_KEY="sk-abc123"   # deepseek\n', {"LLM_API_KEY": "sk-abc123"}),
    ("LLM_API_KEY='sk-abc123' # deepseek\n", {"LLM_API_KEY": "sk-abc123"}),
    ('LLM_API_KEY="sk-abc123"# no space\n', {"LLM_API_KEY": "sk-abc123"}),
    ("export LLM_MODEL=glm-4\n", {"LLM_MODEL": "glm-4"}),
    ('export  LLM_MODEL="glm-4"\n', {"LLM_MODEL": "glm-4"}),
    (r'A="line1\nline2"' + "\n", {"A": "line1\nline2"}),
    (r'A="say \"hi\""' + "\n", {"A": 'say "hi"'}),
    (r'A="C:\\bot\\db"' + "\n", {"A": "C:\\bot\\db"}),
    (r'A="tab\there"' + "\n", {"A": "tab\there"}),
    (r"A='C:\new\db'" + "\n", {"A": r"C:\new\db"}),
    (r"A='it\'s'" + "\n", {"A": "it's"}),
    ("A='$HOME \"x\"'\n", {"A": '$HOME "x"'}),
    ("A=\n", {"A": ""}),
    ('A=""\n', {"A": ""}),
    ("A=''\n", {"A": ""}),
    ("A=  # fill in later\n", {"A": ""}),  # python-dotenv: '# fill in later'; bash and Docker: empty
    ('A="pa#ss" # comment\n', {"A": "pa#ss"}),
    ("A='pa # ss'\n", {"A": "pa # ss"}),
    ("A=value # comment\n", {"A": "value"}),
    ("A=value\t# comment\n", {"A": "value"}),
    ("A=val#ue\n", {"A": "val#ue"}),
    ("A=#value\n", {"A": "#value"}),
    ("A = spaced = value  \n", {"A": "spaced = value"}),
    ("\ufeffA=1\nB=2\n", {"A": "1", "B": "2"}),
    ("A=1\r\nB=\"2\"\r\n# c\r\nC='3' # x\r\n", {"A": "1", "B": "2", "C": "3"}),
    ('A="multi\nline"\nB=2\n', {"A": "multi\nline", "B": "2"}),
    ("# comment\n\n   \n  # indented comment\nA=1", {"A": "1"}),
    ("A=1\nA=2\n", {"A": "2"}),
    ("  A=1\n", {"A": "1"}),
    ('A="中文 值"\n', {"A": "中文 值"}),
]


@pytest.mark.parametrize("text,expected", DOTENV_CASES, ids=[repr(c[0])[:40] for c in DOTENV_CASES])
def test_dotenv_values(tmp_path, text, expected):
    path = tmp_path / ".env"
    path.write_bytes(text.encode("utf-8"))
    assert bot._dotenv_read(path) == expected


@pytest.mark.parametrize("text,line,what", [
    ("LLM_MODEL=deepseek-chat\nTHIS LINE HAS NO EQUALS SIGN\n", 2, "expected KEY=value"),
    ('A=1\nB="never closed\nC=3\n', 2, 'quote that is never closed'),
    ("A='never closed\n", 1, "quote that is never closed"),
    ('A="x" y\n', 1, "after the closing quote"),
    ("1A=x\n", 1, "expected KEY=value"),
])
def test_dotenv_mistakes_name_the_line_and_the_fix(tmp_path, text, line, what):
    path = tmp_path / ".env"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(bot.ConfigError) as e:
        bot.config_load(environ={}, dotenv=path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and f"line {line}" in msg and what in msg and "Fix:" in msg


def test_quoted_key_with_comment_is_sent_without_quotes(tmp_path):
    """The bug users hit: `Bearer "sk-..."` and a 401 from every provider."""
    path = tmp_path / ".env"
    path.write_text('LLM_API_KEY="sk-0123456789abcdef"   # deepseek\nLLM_TIMEOUT = 30 # seconds\n', encoding="utf-8")
    cfg = bot.config_load(environ={}, dotenv=path)
    assert cfg.LLM_API_KEY == "sk-0123456789abcdef" and cfg.LLM_TIMEOUT == 30.0


def test_dotenv_then_environment(tmp_path):
    envfile = tmp_path / ".env"
    envfile.write_text("# comment\nLLM_MODEL=qwen-plus\nLLM_TIMEOUT = 30 # seconds\nBOT_DB=\"/tmp/a b.db\"\n"
                       "LLM_MODLE=typo\n", encoding="utf-8")
    cfg = bot.config_load(environ={"LLM_TIMEOUT": "12"}, dotenv=envfile)
    assert cfg.LLM_MODEL == "qwen-plus" and cfg.LLM_TIMEOUT == 12.0 and cfg.BOT_DB == "/tmp/a b.db"
    assert any("LLM_MODLE" in w and "LLM_MODEL" in w for w in cfg.warnings)
    shown = bot.config_describe(bot.config_load(environ={"LLM_API_KEY": "sk-abcdef"}, dotenv=envfile))
    assert "sk-abcdef" not in shown and "LLM_API_KEY = set, 9 characters" in shown


def test_unknown_setting_in_the_environment_is_warned_with_the_near_name():
    cfg = bot.config_load(environ={"LLM_MODLE": "glm-4"}, dotenv="/nonexistent/.env")
    assert any("LLM_MODLE" in w and "LLM_MODEL" in w for w in cfg.warnings), cfg.warnings
    assert cfg.LLM_MODEL == bot.DEFAULTS["LLM_MODEL"]
