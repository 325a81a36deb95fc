"""Command-line options from a command's config dataclass: each run parameter written once.

A config field is an option when declared with :func:`option` (help text; optionally its flag,
choices, and how its default reads when it depends on something); :func:`internal` marks a
field that is not one; :func:`nested` exposes a nested config's options under a prefix
(``PairConfig.lens`` -> ``--lens-steps`` ...). From that one declaration come the argparse
options (:func:`add_options`), the config built from what was given (:func:`build`), ``--help``
and the README's option tables (:mod:`precompute.readme`).

Types: ``bool`` is a flag (``--force``); ``int``, ``float`` and ``str`` take a value; ``X | None``
may stay unset; ``list[X]`` is comma-separated (``--skip umap,lens``) or, with ``repeat=True``,
a repeated option (``--json A --json B``). An ``InitVar`` field is an option the config folds
into its other fields in ``__post_init__`` (``--skip-lens``, ``--quick``). Help texts may quote
with backticks (kept in the README, dropped in ``--help``) and may contain ``%``.

argparse holds no defaults here (``SUPPRESS``): the config is built from the options given, so
the dataclass's defaults and its ``__post_init__`` checks are the only ones.

Why not tyro or simple-parsing: the CLI promises that every user mistake is ONE line on stderr
(``error: ...``) and exit code 2 (``precompute.cli``). tyro prints multi-line rich error panels;
simple-parsing would need the same error override plus prefix configuration for the nested lens
options. This is a page of plain argparse and no new dependency.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import types
import typing
from dataclasses import MISSING, InitVar, field
from typing import Any

from tying.cache.schema import CACHE_DIR_ENV
from tying.errors import UserError

METADATA_KEY = "precompute.option"  # the field metadata key of this module


def option(default: Any = MISSING, *, help: str, flag: str | None = None, shown: str | None = None,
           choices: typing.Sequence[str] | None = None, positional: bool = False, repeat: bool = False,
           default_factory: Any = MISSING) -> Any:
    """A config field that is a command-line option.

    help: what it does (no default in it: the default is added). flag: the option's name when it
    is not ``--<field-name>`` with dashes. shown: how the default reads when the value alone does
    not say it (``None`` meaning "derived", a device-dependent default...). positional: an
    argument without a flag. repeat: a list given by repeating the option.
    """
    meta = {METADATA_KEY: {"help": help, "flag": flag, "shown": shown, "choices": tuple(choices) if choices else None,
                   "positional": positional, "repeat": repeat}}
    if default_factory is not MISSING:  # a default read when the config is made (from the environment)
        return field(default_factory=default_factory, metadata=meta)
    if isinstance(default, list):
        return field(default_factory=lambda d=tuple(default): list(d), metadata=meta)
    return field(default=default, metadata=meta)


def default_cache_dir() -> str:
    return os.environ.get(CACHE_DIR_ENV) or "cache"


def cache_dir_option() -> Any:
    """``--cache-dir``, one definition for every command: ``$TYING_CACHE_DIR`` when set, else ``cache``."""
    return option(default_factory=default_cache_dir, shown=f"`${CACHE_DIR_ENV}` when set, else `cache`",
                  help="folder of the caches")


def device_option() -> Any:
    """``--device``, one definition for every command that runs a model."""
    return option(None, shown="`cuda` when present, else `cpu`", help="torch device: `cpu`, `cuda`, `cuda:1`, ...")


def internal(default: Any = MISSING, *, default_factory: Any = MISSING) -> Any:
    """A config field that is not a command-line option (set by code, not by the user)."""
    return field(default=default, default_factory=default_factory, metadata={METADATA_KEY: None})


def nested(cls: type, *, prefix: str, defaults: dict[str, Any] | None = None,
           only: typing.Sequence[str] | None = None) -> Any:
    """A nested config dataclass whose options appear as ``--<prefix><name>``; ``defaults``
    replace some of its own (the toy lab's lens trains less), ``only`` exposes some of its
    options (the others keep their defaults or are set by the command)."""
    given = dict(defaults or {})
    return field(default_factory=lambda: cls(**given), metadata={METADATA_KEY: {
        "nested": prefix, "defaults": tuple(sorted(given.items())), "only": tuple(only) if only else None}})


@dataclasses.dataclass(frozen=True)
class Spec:
    """One option as argparse and the README see it."""

    dest: str  # path of the value in the config: "steps", or "lens.steps" in a nested one
    flag: str  # "--lens-steps"; a positional's bare name ("cache")
    kind: type  # bool, int, float or str (of each item for a list)
    many: bool  # a list
    required: bool
    default: Any  # MISSING when required
    help: str
    shown: str | None
    choices: tuple[str, ...] | None
    positional: bool
    repeat: bool


def _unwrap(hint: Any) -> tuple[type, bool]:
    """(item type, is a list) of an annotation: InitVar[X], X | None and list[X] unwrapped."""
    if isinstance(hint, InitVar):
        hint = hint.type
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"an option's type must be X or X | None, got {hint}")
        hint = args[0]
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint)
        return item, True
    return hint, False


@functools.cache
def specs(cls: type, prefix: str = "", dest: str = "", defaults: tuple = (), only: tuple | None = None
          ) -> tuple[Spec, ...]:
    """The options of a config dataclass, in field order; every field must be declared with
    :func:`option`, :func:`internal` or :func:`nested` (a new field cannot be forgotten).
    ``defaults`` and ``only``: a nested config's (see :func:`nested`)."""
    hints = typing.get_type_hints(cls)
    out: list[Spec] = []
    for f in cls.__dataclass_fields__.values():  # InitVar pseudo-fields included, in order
        if typing.get_origin(hints[f.name]) is typing.ClassVar:
            continue
        if METADATA_KEY not in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name}: declare it with option(), internal() or nested()")
        meta = f.metadata[METADATA_KEY]
        if meta is None:
            continue
        if "nested" in meta:
            out += specs(hints[f.name], prefix + meta["nested"], f"{dest}{f.name}.", meta["defaults"], meta["only"])
            continue
        if only is not None and f.name not in only:
            continue
        kind, many = _unwrap(hints[f.name])
        if kind not in (bool, int, float, str) or (kind is bool and (many or f.default is not False)):
            raise TypeError(f"{cls.__name__}.{f.name}: unsupported option type {hints[f.name]}")
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        default = dict(defaults).get(f.name, default)
        name = f.name.replace("_", "-")
        flag = meta["flag"] or (name if meta["positional"] else f"--{prefix}{name}")
        shown = None if f.name in dict(defaults) else meta["shown"]  # a replaced default reads as its value
        out.append(Spec(dest + f.name, flag, kind, many, default is MISSING, default, meta["help"], shown,
                        meta["choices"], meta["positional"], meta["repeat"]))
    return tuple(out)


def flag_of(cls: type, dest: str) -> str:
    """The option of a config field ("widths" -> "--d-model"), for error messages."""
    return next(s.flag for s in specs(cls) if s.dest == dest)


def check_positive(cfg: Any, *dests: str) -> None:
    """UserError naming the option when one of these integer fields (None: unset) is below 1."""
    for dest in dests:
        value = cfg
        for part in dest.split("."):
            value = getattr(value, part)
        if value is not None and value < 1:
            raise UserError(f"{flag_of(type(cfg), dest)} must be a positive integer, got {value}")


def show_default(spec: Spec, markdown: bool = False) -> str:
    """How the default reads: ``shown``, else the value ("" for none, off or empty)."""
    if spec.shown is not None:
        return spec.shown
    value = spec.default
    if value is MISSING or value is None or value is False or value == "" or value == []:
        return ""
    if spec.many:
        text = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    else:
        text = f"{value:g}" if isinstance(value, float) else str(value)
    return f"`{text}`" if markdown and spec.kind is str else text


def _plain(text: str) -> str:
    return text.replace("`", "")


def _converter(spec: Spec):
    what, whats = {int: ("a whole number", "whole numbers"), float: ("a number", "numbers"),
                   str: ("text", "texts")}[spec.kind]

    def one(text: str):
        try:
            return spec.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'") from None

    def comma_list(text: str):
        parts = [p.strip() for p in text.split(",")]
        if spec.kind is str:
            return [p for p in parts if p]
        if not text.strip():
            return []
        try:
            return [spec.kind(p) for p in parts]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {whats} separated by commas, got '{text}'") from None

    return comma_list if spec.many and not (spec.repeat or spec.positional) else one  # else one value per item


def add_options(parser: argparse.ArgumentParser, cls: type) -> None:
    """One argparse option per option field of ``cls``; parsed values land at their ``dest``."""
    for s in specs(cls):
        default = show_default(s)
        text = _plain(s.help + (f" (default: {default})" if default else "")).replace("%", "%%")
        if s.positional:
            parser.add_argument(s.dest, nargs="+" if s.many else None, type=_converter(s), help=text)
        elif s.kind is bool:
            parser.add_argument(s.flag, dest=s.dest, action="store_true", default=argparse.SUPPRESS, help=text)
        else:
            metavar = None if s.choices else s.flag[2:].upper().replace("-", "_")
            if metavar and s.many and not s.repeat:
                metavar += "[,...]"
            parser.add_argument(s.flag, dest=s.dest, type=_converter(s), choices=s.choices, required=s.required,
                                action="append" if s.repeat else "store", default=argparse.SUPPRESS, help=text,
                                metavar=metavar)


def build(cls: type, values: dict[str, Any], **extra: Any) -> Any:
    """The config from parsed values ({dest: value}, only those given): nested configs built
    from their own values, every other field left to its dataclass default."""
    top: dict[str, Any] = dict(extra)
    inner: dict[str, dict[str, Any]] = {}
    for dest, value in values.items():
        head, _, rest = dest.partition(".")
        if rest:
            inner.setdefault(head, {})[rest] = value
        else:
            top[dest] = value
    hints = typing.get_type_hints(cls)
    for name, sub in inner.items():
        given = dict(cls.__dataclass_fields__[name].metadata[METADATA_KEY].get("defaults") or ())
        top[name] = build(hints[name], {**given, **sub})
    return cls(**top)
