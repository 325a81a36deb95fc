"""Text to train the toy twins on: offline English from Python itself, a user file, or a hub dataset.

Every function returns one string of paragraphs separated by a blank line; a paragraph is
the unit :func:`tying.toylab.tokenizer.encode_corpus` treats as a document.
"""

from __future__ import annotations

import ast
import os
import sysconfig
import warnings
from collections.abc import Iterator
from pathlib import Path

from tying.errors import UserError, first_line

PARAGRAPH_BREAK = "\n\n"
"""What separates paragraphs (documents) in every corpus string."""

SKIP_DIRS = frozenset({"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "__pycache__"})
"""Folders of the standard library whose files are not read (tests, IDLE, 2to3, installed packages)."""

MIN_CHARS = 20_000
"""The smallest corpus :func:`check_corpus` accepts by default."""


def _paragraphs(text: str) -> Iterator[str]:
    """The non-empty paragraphs of ``text``, each with its lines stripped of trailing spaces."""
    block: list[str] = []
    for line in text.splitlines():
        line = line.rstrip()
        if line:
            block.append(line)
        elif block:
            yield "\n".join(block)
            block = []
    if block:
        yield "\n".join(block)


def _stdlib_files(root: Path) -> Iterator[Path]:
    """The ``.py`` files under ``root`` in sorted order, skipping :data:`SKIP_DIRS`."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(".py"):
                yield Path(dirpath) / name


def _docstrings(source: str) -> Iterator[str]:
    """Module, class and function docstrings of one source file (module first, then breadth-first)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences in old files
        tree = ast.parse(source)
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(tree):
        if isinstance(node, kinds):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                yield doc


def python_docs_corpus(max_chars: int = 1_200_000) -> str:
    """English text shipped with every Python: the help topics, then standard-library docstrings.

    The help topics are ``pydoc_data.topics.topics`` (in sorted key order); the docstrings
    come from parsing (never importing) the standard library's source files with ``ast``,
    walked in sorted order under ``sysconfig.get_paths()["stdlib"]``, skipping test, IDLE,
    lib2to3 and site-packages folders. Paragraphs are kept whole and added until the next
    one would pass ``max_chars``. The result depends only on the Python version.

    Returns:
        Paragraphs joined by a blank line, at most ``max_chars`` characters.
    """
    if max_chars <= 0:
        raise UserError(f"max_chars must be > 0, got {max_chars}")

    def sources() -> Iterator[str]:
        try:
            from pydoc_data.topics import topics
        except ImportError:  # stripped-down Pythons may lack it
            topics = {}
        for key in sorted(topics):
            yield topics[key]
        root = Path(sysconfig.get_paths()["stdlib"])
        for path in _stdlib_files(root):
            try:
                source = path.read_text(encoding="utf-8")
                yield from _docstrings(source)
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
                continue

    out: list[str] = []
    size = 0
    for text in sources():
        for para in _paragraphs(text):
            extra = len(para) + (len(PARAGRAPH_BREAK) if out else 0)
            if size + extra > max_chars:
                return PARAGRAPH_BREAK.join(out)
            out.append(para)
            size += extra
    return PARAGRAPH_BREAK.join(out)


def read_text_corpus(path, max_chars: int | None = None) -> str:
    """The text of a UTF-8 file, normalised to paragraphs separated by a blank line.

    Raises:
        UserError: the file is missing, unreadable or not UTF-8 text.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"text file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    text = PARAGRAPH_BREAK.join(_paragraphs(text))
    return text if max_chars is None else text[:max_chars]


def load_hf_dataset_text(
    name: str,
    split: str = "train",
    column: str = "text",
    max_chars: int = 1_200_000,
    config: str | None = None,
) -> str:
    """Text of one column of a Hugging Face dataset (streamed), rows as paragraphs, up to ``max_chars``.

    Needs the optional ``datasets`` package and, unless the dataset is cached, the network.

    Raises:
        UserError: ``datasets`` is not installed, the dataset cannot be reached or has no
            such split or column.
    """
    try:
        import datasets
    except ImportError:
        raise UserError("reading a hub dataset needs the 'datasets' package: pip install datasets") from None
    try:
        rows = datasets.load_dataset(name, config, split=split, streaming=True)
        out: list[str] = []
        size = 0
        for row in rows:
            if column not in row:
                raise UserError(f"dataset {name} has no column {column!r}; columns: {', '.join(sorted(row))}")
            for para in _paragraphs(str(row[column] or "")):
                if size + len(para) + len(PARAGRAPH_BREAK) > max_chars:
                    return PARAGRAPH_BREAK.join(out)
                out.append(para)
                size += len(para) + len(PARAGRAPH_BREAK)
        return PARAGRAPH_BREAK.join(out)
    except UserError:
        raise
    except Exception as exc:  # connection errors, unknown dataset or split: all user-fixable
        raise UserError(f"cannot read dataset {name} (split {split}): {first_line(exc)}") from None


def check_corpus(text: str, min_chars: int = MIN_CHARS) -> str:
    """Return ``text`` unchanged if it has at least ``min_chars`` characters.

    Raises:
        UserError: "corpus too small: N characters (need at least M)".
    """
    n = len(text.strip()) if text else 0
    if n < min_chars:
        raise UserError(f"corpus too small: {n} characters (need at least {min_chars})")
    return text


def load_corpus(spec: str, max_chars: int) -> str:
    """The text named by ``spec``: 'python-docs' (offline), 'hf:<dataset>' (online) or a text file; checked."""
    if spec == "python-docs":
        text = python_docs_corpus(max_chars=max_chars)
    elif spec.startswith("hf:"):
        text = load_hf_dataset_text(spec[3:], max_chars=max_chars)
    else:
        if not Path(spec).is_file():
            raise UserError(f"corpus file '{spec}' does not exist (or use 'python-docs' or 'hf:<dataset>')")
        text = read_text_corpus(spec, max_chars=max_chars)
    return check_corpus(text)
