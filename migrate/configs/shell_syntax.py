"""Split a shell script into simple commands made of words with exact character spans.

Enough of POSIX/bash lexing for launch scripts: quotes, backslash escapes and line
continuations, `$(...)`, `${...}` and backticks inside words, comments, the control operators
that separate commands (`&&`, `||`, `|`, `;`, `&`, parentheses), and here-documents, whose
bodies are data and are never looked at. It does not expand anything: the rules only read
literal words, and a word with an expansion is reported as such (`Word.literal` is None).
"""

from __future__ import annotations

from dataclasses import dataclass

_OPERATORS = ("&&", "||", ";;", "|&", "|", ";", "&", "(", ")")
_STOP = frozenset(" \t\r\n;|&()")
_RESERVED = frozenset({"!", "if", "then", "elif", "else", "do", "while", "until", "time", "{", "}"})


@dataclass(frozen=True)
class Word:
    start: int
    end: int
    raw: str

    @property
    def literal(self) -> str | None:
        """The word with its quoting removed; None when it expands a variable or a command."""
        out, i, raw = [], 0, self.raw
        while i < len(raw):
            c = raw[i]
            if c == "'":
                close = raw.index("'", i + 1) if "'" in raw[i + 1 :] else len(raw)
                out.append(raw[i + 1 : close])
                i = close + 1
            elif c in "$`":
                return None
            elif c == "\\" and i + 1 < len(raw):
                out.append(raw[i + 1])
                i += 2
            elif c == '"':
                i += 1
                while i < len(raw) and raw[i] != '"':
                    if raw[i] in "$`":
                        return None
                    if raw[i] == "\\" and i + 1 < len(raw) and raw[i + 1] in '"\\$`':
                        i += 1
                    out.append(raw[i])
                    i += 1
                i += 1
            else:
                out.append(c)
                i += 1
        return "".join(out)


@dataclass(frozen=True)
class Command:
    """One simple command: its words, from assignments through the last argument."""

    words: tuple[Word, ...]

    @property
    def start(self) -> int:
        return self.words[0].start

    @property
    def end(self) -> int:
        return self.words[-1].end

    def program(self) -> int | None:
        """Index of the command word: past reserved words, `NAME=value` prefixes and `env`/`nohup`-style wrappers."""
        i = 0
        while i < len(self.words):
            raw = self.words[i].raw
            if raw in _RESERVED or is_assignment(raw) or raw in ("env", "nohup", "exec", "command", "sudo"):
                i += 1
            else:
                return i
        return None


def is_assignment(raw: str) -> bool:
    name, eq, _ = raw.partition("=")
    return bool(eq) and name.isidentifier()


def commands(text: str) -> list[Command]:
    """The simple commands of `text`, in order."""
    out: list[Command] = []
    words: list[Word] = []
    heredocs: list[tuple[str, bool]] = []
    i, n = 0, len(text)

    def flush() -> None:
        if words:
            out.append(Command(tuple(words)))
            words.clear()

    while i < n:
        c = text[i]
        if c in " \t":
            i += 1
        elif c == "\\" and text.startswith("\n", i + 1):
            i += 2
        elif c == "\\" and text.startswith("\r\n", i + 1):
            i += 3
        elif c in "\r\n":
            flush()
            i = text.find("\n", i)
            i = n if i == -1 else i + 1
            if heredocs:
                i = _skip_heredocs(text, i, heredocs)
                heredocs.clear()
        elif c == "#" and (i == 0 or text[i - 1] in " \t\r\n;|&()"):
            end = text.find("\n", i)
            i = n if end == -1 else end
        elif text.startswith("<<", i) and not text.startswith("<<<", i):
            i += 2
            strip = text.startswith("-", i)
            i += strip
            while i < n and text[i] in " \t":
                i += 1
            end = _word_end(text, i)
            delimiter = Word(i, end, text[i:end]).literal or text[i:end].strip("'\"")
            heredocs.append((delimiter, strip))
            i = end
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
            if op:
                flush()
                i += len(op)
            else:
                end = _word_end(text, i)
                words.append(Word(i, end, text[i:end]))
                i = end
    flush()
    return out


def _word_end(text: str, i: int) -> int:
    n = len(text)
    while i < n:
        c = text[i]
        if c == "&" and i > 0 and text[i - 1] in "<>":
            i += 1
        elif c in _STOP:
            return i
        elif c == "'":
            close = text.find("'", i + 1)
            i = n if close == -1 else close + 1
        elif c == '"':
            i = _double_quoted_end(text, i + 1)
        elif c == "\\":
            i += 2
        elif c == "`":
            close = text.find("`", i + 1)
            i = n if close == -1 else close + 1
        elif c == "$" and text.startswith("(", i + 1):
            i = _balanced_end(text, i + 1, "(", ")")
        elif c == "$" and text.startswith("{", i + 1):
            i = _balanced_end(text, i + 1, "{", "}")
        else:
            i += 1
    return n


def _double_quoted_end(text: str, i: int) -> int:
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        elif c == "$" and text.startswith("(", i + 1):
            i = _balanced_end(text, i + 1, "(", ")")
        else:
            i += 1
    return n


def _balanced_end(text: str, i: int, open_: str, close: str) -> int:
    """The index after the bracket matching the one at `i`, stepping over quotes."""
    depth, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        elif c == "'":
            close_quote = text.find("'", i + 1)
            i = n - 1 if close_quote == -1 else close_quote
        elif c == '"':
            i = _double_quoted_end(text, i + 1) - 1
        elif c == "\\":
            i += 1
        i += 1
    return n


def _skip_heredocs(text: str, i: int, heredocs: list[tuple[str, bool]]) -> int:
    """Step over the bodies of the here-documents opened on the line that just ended."""
    pending = list(heredocs)
    n = len(text)
    while pending and i < n:
        end = text.find("\n", i)
        end = n if end == -1 else end
        line = text[i:end].rstrip("\r")
        delimiter, strip = pending[0]
        if (line.lstrip("\t") if strip else line) == delimiter:
            pending.pop(0)
        i = end + 1
    return min(i, n)
