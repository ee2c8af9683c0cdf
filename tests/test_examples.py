"""Every `Example:` line in bot.py's docstrings is run, so the examples stay true.

The format, one example a line, anywhere in a function's, method's or class's docstring:

    Example: text_tokens('住北京 Go') -> ['住', '住北', '北', '北京', '京', 'go']

- Left of ` -> ` is a call: a Python expression evaluated with bot.py's globals (its functions and
  constants, the private ones too). Right of it is the expected value, a Python expression (usually a
  literal) evaluated the same way. They must be equal (==).
- The line is read from the docstring as Python sees it (what help() shows): write '\\x00' in the
  source for the example '\x00'. A docstring may hold several `Example:` lines.
- An example that needs what one line can't hold (a database, the model, a file) is written
  `Example (knight): ...`, with any word in the parentheses: documentation only, skipped on purpose and
  counted. Better, when it can be done: make it evaluable with a small literal (a dict for a card).
- An `Example:` line that is not `call -> value` fails, except in the Memory section, whose examples are
  being rewritten in this format separately: those are skipped and counted until they are.
"""

import ast
import re

import pytest

import bot
from fakes import ROOT

SOURCE = (ROOT / "bot.py").read_text(encoding="utf-8")
#: `Example: ...` (evaluated) or `Example (word): ...` (documentation only).
EXAMPLE_RE = re.compile(r"(?:^|\s)Example(?: \(([^)]*)\))?: (.+)$")
#: A section banner's middle line: `# Memory (commands, ...) ########`.
BANNER_RE = re.compile(r"^# (\w[^#]*?) #{3,}$")
#: Least number of examples that must run: fewer means the parsing broke, not that the examples are fine.
MIN_RUN = 15


def _section_of():
    starts = [(n, m.group(1)) for n, line in enumerate(SOURCE.splitlines(), 1) if (m := BANNER_RE.match(line))]
    return lambda lineno: next((name for n, name in reversed(starts) if n <= lineno), "")


def _split(text):
    """(call, expected) when text is `call -> value` (both Python expressions, the left a call), else None."""
    for m in re.finditer(" -> ", text):
        left, right = text[:m.start()].strip(), text[m.end():].strip()
        try:
            call, _ = ast.parse(left, mode="eval"), ast.parse(right, mode="eval")
        except SyntaxError:
            continue
        if isinstance(call.body, ast.Call):
            return left, right
    return None


def collect():
    """(id, function, section, tag, call, expected) for every example line; call is None when the line is not evaluable."""
    section_of = _section_of()
    out = []
    for node in ast.walk(ast.parse(SOURCE)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        doc = ast.get_docstring(node) or ""
        for n, line in enumerate(m for m in map(EXAMPLE_RE.search, doc.splitlines()) if m):
            parts = _split(line.group(2))
            call, expected = parts if parts else (None, line.group(2))
            out.append((f"{node.name}-{n + 1}", node.name, section_of(node.lineno), line.group(1), call, expected))
    return out


EXAMPLES = collect()
RUN = [e for e in EXAMPLES if e[3] is None and e[4] is not None]
#: How many ran and how many were skipped, for the line in pytest's summary (see conftest).
COUNTS = {"run": len(RUN), "skipped": len(EXAMPLES) - len(RUN)}


@pytest.mark.parametrize("name, call, expected", [(e[1], e[4], e[5]) for e in RUN], ids=[e[0] for e in RUN])
def test_example(name, call, expected):
    namespace = dict(vars(bot))
    assert eval(call, namespace) == eval(expected, namespace), f"{name}: Example: {call} -> {expected}"


def test_every_example_line_is_evaluable_or_marked():
    bad = [f"{e[1]} ({e[2]}): Example: {e[5]}" for e in EXAMPLES
           if e[3] is None and e[4] is None and not e[2].startswith("Memory")]
    assert not bad, "write these as `Example: call(...) -> value`, or `Example (why): ...` to skip:\n" + "\n".join(bad)


def test_enough_examples_run():
    assert COUNTS["run"] >= MIN_RUN, f"only {COUNTS['run']} docstring examples ran ({COUNTS['skipped']} skipped)"


def test_the_parser_reads_the_documented_format():
    assert _split("text_tokens('a -> b') -> ['a', 'b']") == ("text_tokens('a -> b')", "['a', 'b']")
    assert _split("'我住在北京' -> '用户住在北京'") is None  # not a call
    assert EXAMPLE_RE.search("Shows it. Example (knight): '手机' -> '传讯水晶'").group(1) == "knight"
