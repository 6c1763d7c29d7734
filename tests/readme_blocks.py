"""The README read as a test reads it: its code blocks (with the marker that keeps a block out of the runnable
sequence), its links, its headings and its tables. tests/unit/test_readme.py checks what can be checked
without a fleet; tests/integration/test_first_hour_docs.py runs its commands as written."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import REPO

README = REPO / "README.md"
NOT_RUN = re.compile(r"<!-- not run by the README test: (.+?) -->")
FENCE = re.compile(r"^```(\w*)\s*$")
EXITS = re.compile(r"#\s*exits (\d+)\b")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    language: str
    text: str
    line: int  # where the fence opens
    heading: str  # the section it is in
    not_run: str | None  # why a test does not run it (None: it runs)

    def commands(self) -> list[str]:
        """Its command lines, a line ending in a backslash joined with the next; comments dropped."""
        out: list[str] = []
        pending = ""
        for raw in self.text.splitlines():
            line = raw.rstrip()
            if pending:
                line = pending + " " + line.lstrip()
                pending = ""
            if line.endswith("\\"):
                pending = line[:-1].rstrip()
                continue
            command = strip_comment(line).strip()
            if command:
                out.append(command)
        return out

    def exit_codes(self) -> dict[str, int]:
        """The commands a comment says exit non-zero as written: `# exits 6 …` on the line above or after it."""
        found: dict[str, int] = {}
        pending: int | None = None
        for raw in self.text.splitlines():
            command = strip_comment(raw).strip()
            match = EXITS.search(raw[len(strip_comment(raw)):])
            if not command:
                pending = int(match.group(1)) if match else pending
                continue
            code = int(match.group(1)) if match else pending
            if code is not None:
                found[command] = code
            pending = None
        return found


def strip_comment(line: str) -> str:
    """`cmd args   # note` -> `cmd args` (a `#` inside quotes is kept)."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] == " "):
            return line[:index]
    return line


def blocks(path: Path = README) -> list[Block]:
    lines = path.read_text().splitlines()
    found: list[Block] = []
    heading, marker = "", None
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("#") and not line.startswith("#!"):
            heading = line.lstrip("#").strip()
        match = NOT_RUN.search(line)
        if match:
            marker = match.group(1)
        fence = FENCE.match(line)
        if fence and fence.group(1):
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            found.append(Block(fence.group(1), "\n".join(lines[index + 1:end]), index + 1, heading, marker))
            marker = None
            index = end
        index += 1
    return found


def headings(path: Path = README) -> list[str]:
    text = FENCED.sub("", path.read_text())
    return [line.lstrip("#").strip() for line in text.splitlines() if re.match(r"^#{1,6} ", line)]


FENCED = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    slug = re.sub(r"[^\w\- ]", "", heading.lower()).strip()
    return slug.replace(" ", "-")


def links(path: Path) -> list[str]:
    return LINK.findall(FENCED.sub("", path.read_text()))


def table_rows(section: str, path: Path = README) -> list[list[str]]:
    """The rows (cells, stripped) of the first table under the heading `section`."""
    text = path.read_text()
    start = text.index(f"## {section}\n")
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not set(line) <= set("|-: "):
            rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif rows and not line.startswith("|"):
            break
    return rows[1:]  # without the header
