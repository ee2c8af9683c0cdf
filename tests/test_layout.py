"""bot.py reads top to bottom: its section banners come in STYLE.md's order, and nothing in a section
uses a function, class or constant defined in a section below it; inside a section cut into sub-sections
(`# -- Words ----`), nothing in a sub-section uses one below it either."""

import ast
import re

import pytest

from fakes import ROOT

SOURCE = (ROOT / "bot.py").read_text(encoding="utf-8")

#: STYLE.md's sections, from low level to high; a banner's name starts with one of these.
ORDER = ["Config", "Storage", "Text & embeddings", "LLM client", "Search", "Memory", "Summaries", "Characters",
         "Prompt assembly", "Replies", "OneBot", "CLI"]

#: Longest line bot.py may have, in characters (a Pi's terminal).
LINE_LIMIT = 120

#: The sub-sections of a section, low to high (STYLE.md: a word list, the facts made from it, the rows that store
#: them, what finds them, what changes them, the commands that call the changes).
SUBSECTIONS = {"Memory": ["Words", "Facts", "Rows", "Recall", "Changes", "Commands"]}

#: Uses of a lower section that can't be avoided: (user, what it uses) -> why.
EXCEPTIONS = {}  # (name, what it uses from below): why; none are needed today

_BANNER_RE = re.compile(r"^#{10,}\n# (.+?) #+\n#{10,}$", re.M)
_SUB_RE = re.compile(r"^# -- (.+?) -{3,}$", re.M)


def banners(source=SOURCE):
    """[(line number, section name)] of the three-line banners, in file order."""
    out = []
    for m in _BANNER_RE.finditer(source):
        name = next((s for s in ORDER if m.group(1).startswith(s)), m.group(1))
        out.append((source.count("\n", 0, m.start()) + 2, name))
    return out


def subsections(source=SOURCE):
    """[(line number, 'Section/Sub-section')] of the `# -- Name ----` lines, in file order."""
    marks = banners(source)
    out = []
    for m in _SUB_RE.finditer(source):
        line = source.count("\n", 0, m.start()) + 1
        section = max([(ln, name) for ln, name in marks if ln <= line], default=(0, "top"))[1]
        out.append((line, f"{section}/{m.group(1)}"))
    return out


def _bound(node):
    """Names a function binds itself (parameters, assignments, loops, imports): not references to globals."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not node:
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in n.names}
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
    return out


def _defined(stmt):
    """The module-level names a top-level statement defines."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _used(stmt, names):
    """The module-level names a top-level statement refers to: by Name, as the attribute of a Name, or, in a
    table outside any function, as a string that is exactly such a name (looked up later, as db_connect does
    with a migration's step)."""
    code = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    local = _bound(stmt) - _defined(stmt) if code else set()
    used = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in local:
            used.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id not in local \
                and n.value.id in names:
            used.add(n.value.id)
        elif not code and isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names:
            used.add(n.value)
    return used & names


def layout(source=SOURCE):
    """{name: section} for every module-level definition, and [(user, user's section, used, its section)]
    for every use of a section below."""
    marks = sorted(banners(source) + subsections(source))
    section_of_line = lambda line: max([i for i, (ln, _) in enumerate(marks) if ln <= line], default=-1)
    tree = ast.parse(source)
    where = {}
    for stmt in tree.body:
        for name in _defined(stmt):
            where.setdefault(name, section_of_line(stmt.lineno))
    wrong = []
    for stmt in tree.body:
        mine = section_of_line(stmt.lineno)
        users = sorted(_defined(stmt)) or [f"line {stmt.lineno}"]
        for name in sorted(_used(stmt, set(where))):
            if where[name] > mine:
                wrong += [(user, marks[mine][1] if mine >= 0 else "top", name, marks[where[name]][1]) for user in users]
    return where, wrong


def test_banners_follow_style_order():
    names = [name for _, name in banners()]
    assert names == ORDER, f"bot.py's banners are {names}; STYLE.md's order is {ORDER}"


def test_no_section_uses_one_below_it():
    _, wrong = layout()
    unexplained = [w for w in wrong if (w[0], w[2]) not in EXCEPTIONS]
    assert not unexplained, "uses of a lower section:\n" + "\n".join(
        f"  {user} ({sec}) uses {name} ({its})" for user, sec, name, its in unexplained)


def test_lines_fit_a_pi_terminal():
    """STYLE.md: lines stay within LINE_LIMIT characters; a long table has one entry a line."""
    long = [(n, len(line)) for n, line in enumerate(SOURCE.splitlines(), 1) if len(line) > LINE_LIMIT]
    assert not long, f"bot.py lines over {LINE_LIMIT} characters (line, length): {long}"


def test_subsections_follow_their_order():
    found = {}
    for _, name in subsections():
        section, sub = name.split("/", 1)
        found.setdefault(section, []).append(sub)
    assert found == SUBSECTIONS, f"bot.py's sub-sections are {found}; expected {SUBSECTIONS}"


def test_exceptions_are_still_needed():
    _, wrong = layout()
    used = {(w[0], w[2]) for w in wrong}
    assert set(EXCEPTIONS) <= used, f"no longer needed, remove from EXCEPTIONS: {set(EXCEPTIONS) - used}"


def test_nothing_above_replies_takes_the_app():
    """App (the running bot) is defined in Replies: a section above it gets the parts it needs instead."""
    marks = banners()
    replies = next(ln for ln, name in marks if name == "Replies")
    takers = [f"{n.name} (line {n.lineno})" for n in ast.walk(ast.parse(SOURCE))
              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno < replies
              and "app" in [a.arg for a in n.args.args + n.args.kwonlyargs]]
    assert not takers, f"these take the App although they sit above Replies: {takers}"


@pytest.mark.parametrize("source, bad", [
    ("#" * 20 + "\n# Config ####\n" + "#" * 20 + "\ndef a():\n    return b()\n\n"
     + "#" * 20 + "\n# Storage ####\n" + "#" * 20 + "\ndef b():\n    return 1\n", [("a", "Config", "b", "Storage")]),
    ("#" * 20 + "\n# Config ####\n" + "#" * 20 + "\ndef a(b):\n    return b()\n\n"
     + "#" * 20 + "\n# Storage ####\n" + "#" * 20 + "\ndef b():\n    return 1\n", []),
    ("#" * 20 + "\n# Config ####\n" + "#" * 20 + "\nX = {'step': 'b'}\n\n"
     + "#" * 20 + "\n# Storage ####\n" + "#" * 20 + "\nB = 1\ndef b():\n    return B\n", [("X", "Config", "b", "Storage")]),
    ("#" * 20 + "\n# Memory ####\n" + "#" * 20 + "\n# -- Words ----\nW = 1\ndef a():\n    return b()\n\n"
     + "# -- Facts ----\ndef b():\n    return W\n", [("a", "Memory/Words", "b", "Memory/Facts")]),
    ("#" * 20 + "\n# Memory ####\n" + "#" * 20 + "\n# -- Words ----\nW = 1\ndef a():\n    return c()\n\n"
     + "def c():\n    return W\n# -- Facts ----\ndef b():\n    return a()\n", []),
])
def test_the_check_sees_what_it_should(source, bad):
    assert layout(source)[1] == bad
