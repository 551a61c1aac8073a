"""The README stays true: every ``frd …`` command in its code blocks parses with today's CLI,
every ``python -m benchmarks.…`` it names exists, and its Python examples run.

How commands are read from the README's fenced blocks (all but ```python ones): a leading ``$ ``
is a prompt; a line ending in ``\\`` continues on the next; ``#`` starts a comment; ``&&``,
``||``, ``;`` and ``|`` separate commands; a command starts with ``frd`` (or a path ending in
``/frd``, or ``python -m frd``), at the start of a line or after ``--`` (``ray job submit … --
frd …``); ``make …`` lines are left to the Makefile. ``...`` stands for flags left out: it is
dropped, and ``--out OUT`` is supplied where no ``--out`` is given (the one flag a run cannot
do without); a bare ``frd ...`` (no subcommand) is not a command. A shell loop's variable
(``for S in 5 10; do``) stands for each of its values. Parsing alone, nothing runs.

The Python examples are the ```python blocks that ``import frd``; each runs in a fresh namespace
with a temporary folder as the working directory, so its ``results/…`` folders land there.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
from pathlib import Path

import pytest

from frd.cli import parse

README = Path(__file__).resolve().parents[1] / "README.md"
SEPARATORS = {"&&", "||", ";", "|"}
ELIDED = "..."
FRD_WORD = re.compile(r"(^|\s)(\S*/)?frd(\s|$)")
"""A line that may hold an frd command: ``frd`` as a word, or a path ending in ``/frd``."""


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced block (```), in order."""
    return [(m.group(1).strip().lower(), m.group(2))
            for m in re.finditer(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", text, re.MULTILINE | re.DOTALL)]


LOOP = re.compile(r"^\s*for (\w+) in ([^;]+); do\s*$", re.MULTILINE)
"""A shell loop's head, ``for VAR in VALUES; do``."""


def _logical_lines(body: str) -> list[str]:
    """Lines with ``\\`` continuations joined and a leading ``$ `` prompt removed; a loop's body once
    per value of its variable."""
    joined = re.sub(r"\\\n", " ", body)
    for name, values in LOOP.findall(joined):
        joined = "\n".join(re.sub(rf"\$\{{?{name}\b\}}?", value, joined) for value in values.split())
    return [line.strip().removeprefix("$ ") for line in joined.splitlines() if line.strip()]


def _is_frd(token: str) -> bool:
    return token == "frd" or token.endswith("/frd")


def frd_commands(text: str) -> list[list[str]]:
    """The arguments (after ``frd``) of every frd command in ``text``'s shell blocks."""
    commands = []
    for info, body in code_blocks(text):
        if info.startswith("python"):
            continue
        for line in _logical_lines(body):
            if not FRD_WORD.search(line):  # prose in a block (a layout listing) need not be shell
                continue
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError as exc:  # unbalanced quotes: a command no shell could run
                commands.append([f"<{exc}: {line}>"])
                continue
            segments: list[list[str]] = [[]]
            for token in tokens:
                if token in SEPARATORS:
                    segments.append([])
                else:
                    segments[-1].append(token)
            for segment in segments:
                if segment[:3] == ["python", "-m", "frd"]:
                    segment = ["frd", *segment[3:]]
                starts = [i for i, t in enumerate(segment) if _is_frd(t) and (i == 0 or segment[i - 1] == "--")]
                if starts:
                    commands.append(segment[starts[0] + 1:])
    return commands


def with_elisions_resolved(args: list[str]) -> list[str] | None:
    """``args`` with ``...`` dropped (and ``--out OUT`` added if it was there and no ``--out`` is);
    None for a bare ``frd ...``."""
    if ELIDED not in args:
        return args
    kept = [a for a in args if a != ELIDED]
    if not kept:
        return None
    return kept if "--out" in kept else [*kept, "--out", "OUT"]


def benchmark_modules(text: str) -> list[str]:
    """Every ``python -m benchmarks.X`` the README names, in prose or in code."""
    return sorted(set(re.findall(r"python -m (benchmarks(?:\.\w+)+)", text)))


def python_examples(text: str) -> list[str]:
    return [body for info, body in code_blocks(text) if info.startswith("python") and re.search(r"^import frd\b", body, re.M)]


TEXT = README.read_text()
COMMANDS = [c for c in (with_elisions_resolved(args) for args in frd_commands(TEXT)) if c is not None]


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_each_frd_command_in_the_readme_parses(args):
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            parse(args)  # as frd parses it: a command line that sweeps, with its axes taken off
    except SystemExit as exc:
        if exc.code == 0 and ("--help" in args or "-h" in args):
            return
        pytest.fail(f"README command `frd {' '.join(args)}` does not parse: {stderr.getvalue().strip()}", pytrace=False)


@pytest.mark.parametrize("module", benchmark_modules(TEXT))
def test_each_benchmark_the_readme_names_exists(module):
    assert importlib.util.find_spec(module) is not None, f"README names python -m {module}, which does not exist"


def test_the_readmes_python_examples_run(tmp_path, monkeypatch):
    examples = python_examples(TEXT)
    assert examples, "the README has no ```python block that imports frd"
    for number, example in enumerate(examples, 1):
        folder = tmp_path / str(number)  # each example its own working directory
        folder.mkdir()
        monkeypatch.chdir(folder)
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(example, f"README.md python example {number}", "exec"), {})
        assert list(Path().glob("results/*/summary.csv")), f"example {number} saves its summary under results/"


def test_the_readme_has_commands_and_an_example_per_domain():
    """The extraction above finds something, so the tests cannot pass by finding nothing."""
    assert {c[0] for c in COMMANDS} >= {"rl", "compare", "cls"}
    examples = "\n".join(python_examples(TEXT))
    assert "frd.rl.run(" in examples and "frd.classification.run(" in examples


# -- the extraction itself, on a README written here ----------------------------------------------
SAMPLE = """
Text with `python -m benchmarks.throughput --lockstep` inline.

```bash
$ frd rl --method frd --out results/a   # a comment
make demo
frd cls --method fd \\
        --devices 3 && .venv/bin/frd compare --seeds 2 ... --agents 2
python -m frd ...
ray job submit --address http://HEAD:8265 -- frd compare --out /data/x
```

```python
import frd
```
"""


def test_commands_are_extracted_with_prompts_continuations_chains_and_elisions():
    found = [with_elisions_resolved(c) for c in frd_commands(SAMPLE)]
    assert found == [["rl", "--method", "frd", "--out", "results/a"], ["cls", "--method", "fd", "--devices", "3"],
                     ["compare", "--seeds", "2", "--agents", "2", "--out", "OUT"], None,
                     ["compare", "--out", "/data/x"]]
    assert benchmark_modules(SAMPLE) == ["benchmarks.throughput"] and python_examples(SAMPLE) == ["import frd\n"]


def test_a_command_that_does_not_parse_fails_naming_it():
    with pytest.raises(pytest.fail.Exception, match=r"`frd rl --agents two` does not parse: .*invalid int value"):
        test_each_frd_command_in_the_readme_parses(["rl", "--agents", "two"])
