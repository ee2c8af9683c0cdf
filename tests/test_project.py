"""The files around bot.py: requirements.txt declares what the code imports, and the README's commands
are ones that work on a fresh Debian or Raspberry Pi OS (no `python`, no pip outside a venv)."""

import ast
import importlib.metadata
import re
import signal
import sys

import pytest

from fakes import ROOT, BotProcess

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _norm(name):
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements():
    """{normalised distribution name: the requirement line}."""
    out = {}
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line:
            out[_norm(re.split(r"[<>=!~;\s\[]", line)[0])] = line
    return out


def third_party_imports(path):
    """Top-level modules a file imports that are not in the standard library, nor the project's own."""
    mods = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            mods |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods.add(node.module.split(".")[0])
    own = {"bot", "conftest", "fakes", "footprint", "locomo_recall"}
    return {m for m in mods if m not in sys.stdlib_module_names and m not in own}


@pytest.mark.parametrize("path", ["bot.py", "tests/conftest.py", "tests/fakes.py", "tests/bench.py"])
def test_requirements_declare_every_direct_import(path):
    dists = importlib.metadata.packages_distributions()
    declared = requirements()
    missing = []
    for mod in sorted(third_party_imports(ROOT / path)):
        names = {_norm(d) for d in dists.get(mod, [mod])}
        if not names & set(declared):
            missing.append(f"{mod} ({', '.join(sorted(names))})")
    assert not missing, f"{path} imports what requirements.txt does not declare: {missing}"


def test_aiocqhttp_is_capped_below_the_next_minor_version():
    assert requirements()["aiocqhttp"] == "aiocqhttp>=1.4.4,<1.5"  # bot.py overrides a private method of it


def test_readme_commands_work_on_debian_and_pi_os():
    commands = [line for line in README.splitlines() if "bot.py" in line or "pip" in line or "pytest" in line]
    assert commands
    for line in commands:
        assert not re.search(r"(?<![/\w.])python (?:-m |bot\.py)", line), f"no `python` on Debian/Pi OS: {line}"
        assert not re.search(r"(?<![/\w.])pip install", line), f"pip outside a venv is refused there: {line}"
    first_screen = README.split("---")[0]
    assert "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt && .venv/bin/python bot.py" in first_screen
    assert ".venv/bin/python -m pytest -q tests" in first_screen
    assert "apt install python3-venv" in first_screen
    assert "ExecStart=/home/pi/mnemo/.venv/bin/python bot.py" in README


def test_readme_ready_line_is_the_one_the_bot_prints(env, procs):
    """The README shows what a default start prints; the test starts the real bot (keyword-only, its own port)
    and compares: the same words, schema version and characters count. It is `python bot.py` as typed (not the
    tests' cached launch, fakes.bot_command), and Ctrl-C stops it cleanly."""
    shown = [line for line in README.splitlines() if line.startswith("Mnemo ready: ")]
    assert len(shown) == 1, shown
    p = BotProcess(env, real=True)
    procs.append(p)
    p.wait_ready()
    printed = next(line.strip() for line in p.out if line.startswith("Mnemo ready: "))
    assert p.finish(signal.SIGINT) == 0 and "Traceback" not in p.stderr, p.stderr  # Ctrl-C in the terminal
    assert "INFO mnemo: stopped" in p.stdout, p.stdout[-300:]
    # the README's start is the default one: port 8080 and the model loaded
    default = printed.replace(f":{env['ONEBOT_PORT']}/", ":8080/").replace("vector search off", "vector search on")
    assert shown[0] == default
