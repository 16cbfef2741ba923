"""Refuse, before libcst sees it, a Python file nested deeper than CPython's own parser accepts.

libcst's native parser recurses once per nesting level: about 1,000 nested brackets raise an
internal error in it and 2,000 crash the process (SIGSEGV), taking a whole run down. CPython
refuses such a file anyway (more than 200 nested brackets: "too many nested parentheses"; more
than 100 indented blocks: "too many levels of indentation"; a very long chain of operators:
"too complex" or a RecursionError while building the tree), so no such file runs and none can
need migrating. CPython's own parser is the check: it is exact, it is C, and it costs a few
percent of a libcst parse; it runs only on files a libcst parse is about to see.

Any other SyntaxError is left to libcst: a file may use syntax newer than the interpreter running
neuron-migrate, which libcst parses and migrates, and a real syntax error is reported from
libcst's failure with CPython's location, as before.
"""

from __future__ import annotations

import ast

_LIMITS = ("too many nested parentheses", "too many levels of indentation", "too complex")


def refusal(data: bytes | str, path: str) -> tuple[str, int] | None:
    """`(report line, line number)` when CPython's parser refuses `data` for its nesting, else None."""
    return cpython_tree(data, path)[1]


def cpython_tree(data: bytes | str, path: str) -> tuple[ast.Module | None, tuple[str, int] | None]:
    """CPython's tree of `data` (None when it does not parse) and `refusal`'s answer, from one parse.

    The engine reads the tree's string statements (`migrate.prefilter.docstring_lines`) before deciding
    whether libcst needs to see the file at all.
    """
    try:
        tree = compile(data, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as err:
        if not any(limit in str(err.msg) for limit in _LIMITS):
            return None, None
        line = err.lineno or 1
        return None, (f"{path}:{line}: nested too deeply for Python's parser ({err.msg}); file skipped", line)
    except (RecursionError, MemoryError):
        return None, (f"{path}:1: nested too deeply for Python's parser (too complex to parse); file skipped", 1)
    except ValueError:  # NUL bytes and the like: libcst reports them
        return None, None
    assert isinstance(tree, ast.Module)
    return tree, None
