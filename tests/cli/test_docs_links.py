"""The docs a newcomer reads point at things that exist (issue 28, part 5).

For README.md and every page under docs/:

- every relative markdown link (and image) names an existing file, and a ``#anchor``
  names a heading of that page (GitHub's heading ids);
- every ``yarn-adapt ...`` command shown in a code block or in inline code is a real
  command of the click tree: each subcommand exists, each ``--option`` is one of the
  command's (or its group's), and ``bench NAME`` is a registered benchmark;
- ``python -m tracing SUB`` (and ``yarn-adapt-tracing SUB``) and ``python -m
  preemption SUB`` name real subcommands.

Placeholders in capitals (``NAME``, ``FILE``), ``...`` and bracketed optional parts are
left alone; ``a|b|c`` (or ``a\\|b`` in a table) means each of a, b and c. The last
tests feed the checks a page with a dead link and unknown commands, so a check that
stops finding problems fails too.
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from yarn_adapt import bench
from yarn_adapt.cli import cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

FENCE = re.compile(r"^ {0,3}(```|~~~)")
INLINE_CODE = re.compile(r"`([^`]+)`")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# "yarn-adapt" as a command word: not a path (/etc/yarn-adapt/), a file
# (yarn-adapt.toml) or another name (yarn-adapt-agent).
YARN_ADAPT = re.compile(r"(?:^|(?<=[\s;&|(]))yarn-adapt(?=\s|$)")
PYTHON_M = re.compile(
    r"(?:python3?\s+-m\s+(tracing|preemption)|(?<![\w/.\-])yarn-adapt-tracing)(?=\s|$)"
)
# where a shell command ends: a pipe, &&, ;, a redirection or a comment
COMMAND_END = re.compile(r"\s(?:\|(?=\s)|&&|;|\d?>|<|#)|\$\(|`")
PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z0-9_\-\[\].,]*|\.\.\.|…|<.*>|\[.*|.*\]|\(.*|.*\))$")
SHELL_COMMENT = re.compile(r"(?:^|\s)#.*$")
HELP = {"--help", "-h"}


# --------------------------------------------------------------------------- reading


def split_code(text: str) -> tuple[str, list[str]]:
    """The page's prose (fenced blocks blanked) and its code: every fenced block's
    lines (a line ending in a backslash joined to the next) and every inline span."""
    prose: list[str] = []
    code: list[str] = []
    fenced = False
    block: list[str] = []
    for line in text.splitlines():
        if FENCE.match(line):
            if fenced:
                code.extend(SHELL_COMMENT.sub("", line) for line in _joined(block))
                block = []
            fenced = not fenced
            prose.append("")
            continue
        if fenced:
            block.append(line)
            prose.append("")
        else:
            prose.append(line)
    body = "\n".join(prose)
    code.extend(span.replace("\n", " ") for span in INLINE_CODE.findall(body))
    return INLINE_CODE.sub("", body), code


def _joined(lines: list[str]) -> list[str]:
    out: list[str] = []
    pending = ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
        else:
            out.append(pending + line)
            pending = ""
    if pending:
        out.append(pending)
    return out


def anchors(text: str) -> set[str]:
    """The ids GitHub gives the page's headings."""
    prose = _without_fences(text)
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in prose.splitlines():
        match = HEADING.match(line)
        if not match:
            continue
        slug = slugify(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _without_fences(text: str) -> str:
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            lines.append("")
            continue
        lines.append("" if fenced else line)
    return "\n".join(lines)


def slugify(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


# --------------------------------------------------------------------------- links


def dead_links(page: Path, text: str | None = None) -> list[str]:
    """Each relative link of ``page`` that names no file, or no heading of it."""
    text = page.read_text(encoding="utf-8") if text is None else text
    prose, _ = split_code(text)
    problems: list[str] = []
    for target in LINK.findall(prose):
        if re.match(r"^[a-z][a-z0-9+.\-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        where = (page.parent / path_part).resolve() if path_part else page
        if not where.exists():
            problems.append(f"{page.name}: link to {target}: no such file")
            continue
        if anchor and where.suffix == ".md":
            known = anchors(where.read_text(encoding="utf-8") if path_part else text)
            if anchor not in known:
                problems.append(f"{page.name}: link to {target}: no heading #{anchor}")
    return problems


# --------------------------------------------------------------------------- commands


def command_texts(code: str) -> Iterator[tuple[str, list[str]]]:
    """Each command shown in a piece of code: its program and its words, up to where
    the shell command ends."""
    for pattern, program in ((YARN_ADAPT, "yarn-adapt"), (PYTHON_M, None)):
        for match in pattern.finditer(code):
            rest = code[match.end() :].replace("\\|", "|")
            end = COMMAND_END.search(rest)
            words = (rest[: end.start()] if end else rest).split()
            name = program or (match.group(1) or "tracing")
            yield name, words


def bad_commands(page: Path, text: str | None = None) -> list[str]:
    """Each command a page shows that the command line does not have."""
    text = page.read_text(encoding="utf-8") if text is None else text
    _, code = split_code(text)
    problems: list[str] = []
    for piece in code:
        for program, words in command_texts(piece):
            shown = " ".join([program, *words])
            if program == "yarn-adapt":
                problems.extend(f"{page.name}: `{shown}`: {p}" for p in check_click(cli, words))
            elif program == "preemption":
                problems.extend(f"{page.name}: `{shown}`: {p}" for p in check_preemption(words))
            else:
                problems.extend(f"{page.name}: `{shown}`: {p}" for p in check_tracing(words))
    return problems


def check_click(root: click.Command, words: list[str], program: str = "yarn-adapt") -> list[str]:
    """Walk ``words`` down the click tree from ``root``: every subcommand must exist,
    every option must be the command's, and ``bench``'s NAME must be registered."""
    problems: list[str] = []
    node = root
    path: list[str] = []
    positionals = 0
    i = 0
    while i < len(words):
        word = words[i].strip("`'\",;:")
        i += 1
        bare = word.lstrip("[(").rstrip("])")
        if bare.startswith("-") and len(bare) > 1 and not bare[1].isdigit():
            name = bare.split("=", 1)[0]
            option = _option(node, name)
            if option is None and name not in HELP:
                problems.append(f"{' '.join(path) or program} has no option {name}")
            elif (
                option is not None
                and not option.is_flag
                and "=" not in bare
                and not word.endswith(("]", ")"))
                and i < len(words)
            ):
                i += 1  # the option's value
            continue
        if PLACEHOLDER.match(word) or not word:
            if isinstance(node, click.Group):
                break  # a placeholder for the subcommand: nothing more to check
            positionals += 1
            continue
        if isinstance(node, click.Group):
            names = word.split("|")
            missing = [n for n in names if n not in node.commands]
            if missing:
                where = " ".join(path) or program
                problems.append(f"{where} has no subcommand {', '.join(missing)}")
                break
            node = node.commands[names[0]]
            path.append(names[0])
            continue
        if path == ["bench"] and positionals == 0:
            known = benchmarks()
            missing = [n for n in word.split("|") if n not in known]
            if missing:
                problems.append(f"no benchmark {', '.join(missing)}")
        positionals += 1
    return problems


@functools.cache
def benchmarks() -> frozenset[str]:
    return frozenset(b.name for b in bench.available())


def _option(command: click.Command, name: str) -> click.Option | None:
    for param in command.params:
        if isinstance(param, click.Option) and name in (*param.opts, *param.secondary_opts):
            return param
    return None


def check_preemption(words: list[str]) -> list[str]:
    from preemption.cli import agent_group

    return check_click(agent_group, words, "python -m preemption")


def check_tracing(words: list[str]) -> list[str]:
    from tracing.__main__ import parser

    choices: set[str] = set()
    for action in parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            choices.update(action.choices)
    for word in words:
        bare = word.strip("`'\",;:")
        if bare.startswith("-") or PLACEHOLDER.match(bare) or not bare:
            continue
        missing = [n for n in bare.split("|") if n not in choices]
        return [f"python -m tracing has no subcommand {', '.join(missing)}"] if missing else []
    return []


# --------------------------------------------------------------------------- tests


def test_the_pages_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert {"README.md", "docs/ARCHITECTURE.md", "docs/CLI.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_points_at_something(page: Path) -> None:
    problems = dead_links(page)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_command_shown_exists(page: Path) -> None:
    problems = bad_commands(page)
    assert not problems, "\n".join(problems)


def test_the_readme_starts_with_the_two_commands() -> None:
    """The main command and the test command are the README's first code blocks
    (.ci/run reads the second)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```bash\n(.*?)\n```", text, flags=re.M | re.S)
    assert blocks[:2] == ["pip install . && yarn-adapt demo", "tests/setup.sh && tests/run"]
    assert "<!-- main-command -->\n```bash\npip install . && yarn-adapt demo" in text
    assert "<!-- test-command -->\n```bash\ntests/setup.sh && tests/run" in text


BROKEN = """\
# A page

## Real heading

See [the map](docs/ARCHITECTURE.md), [nothing](docs/no-such-page.md),
[a heading](#real-heading), [no heading](#nowhere) and
![a picture](docs/screenshots/overview.png).

```bash
yarn-adapt observe --json
yarn-adapt frobnicate --hard
yarn-adapt config validate FILE --strict --loudly
yarn-adapt bench no-such-bench --quick
yarn-adapt trace --config x.toml ingest | tail
python -m tracing ingest --redis-url URL
python -m tracing egest
python -m preemption squeeze --config FILE
```

Inline: `yarn-adapt guard status [--config TOML | --url URL]`, `yarn-adapt
operator-token issue|list|remove`, and in a table `yarn-adapt agent run\\|restore\\|dance`.
"""


def test_the_link_check_finds_a_dead_link_and_a_missing_heading() -> None:
    found = dead_links(ROOT / "README.md", BROKEN)
    assert found == [
        "README.md: link to docs/no-such-page.md: no such file",
        "README.md: link to #nowhere: no heading #nowhere",
    ]


def test_the_command_check_finds_what_does_not_exist() -> None:
    found = bad_commands(ROOT / "README.md", BROKEN)
    assert len(found) == 7, found
    for expected in (
        "yarn-adapt has no subcommand frobnicate",
        "config validate has no option --loudly",
        "no benchmark no-such-bench",
        "python -m tracing has no subcommand egest",
        "python -m preemption has no subcommand squeeze",
        "operator-token has no subcommand remove",
        "agent has no subcommand dance",
    ):
        assert any(expected in line for line in found), (expected, found)


def test_anchors_follow_github() -> None:
    text = "# The flow: observe → model\n## `serve` and `demo`\n## Again\n## Again\n"
    assert anchors(text) == {"the-flow-observe--model", "serve-and-demo", "again", "again-1"}
