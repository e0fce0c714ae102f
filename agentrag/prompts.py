"""Every prompt agentrag sends to a model, as plain jinja2 files you can read and override.

The built-in templates live in the top-level ``prompts/`` folder of the repository (inside
the wheel: ``agentrag/_data/prompts``). Each ``<name>.j2`` renders to chat messages
through two blocks::

    {% block system %}...{% endblock %}   (optional)
    {% block user %}...{% endblock %}

Override a prompt for one :class:`Prompts` instance with a template string, or put files
with the same names in your own directory (searched before the built-ins)::

    prompts = Prompts(directory="my_prompts", overrides={"gate": "{% block user %}...{% endblock %}"})
    prompts.render("gate", question="hi")

A user template can extend a built-in one through the ``builtin/`` prefix, e.g.
``{% extends "builtin/answer.j2" %}{% block system %}{{ super() }}Answer in French.{% endblock %}``.
Templates are rendered with :class:`jinja2.StrictUndefined`: a missing variable is an error.
"""

from __future__ import annotations

import functools
import re
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from agentrag._resources import resource_dir

if TYPE_CHECKING:
    from agentrag.hits import Hit

__all__ = [
    "PROMPT_NAMES",
    "Prompts",
    "chunk_views",
    "default_prompts",
    "format_chunk",
    "format_chunks",
    "new_delimiter",
    "render",
]

PROMPT_NAMES: tuple[str, ...] = (
    "gate",
    "condense",
    "rewrite",
    "route",
    "decompose",
    "sufficiency",
    "rerank",
    "answer",
    "support",
)

_SUFFIX = ".j2"
_BUILTIN_PREFIX = "builtin"
_DELIMITER_PREFIX = "SOURCE-"
_UNDEFINED_RE = re.compile(r"'(\w+)' is undefined")

Message = dict[str, str]


def new_delimiter() -> str:
    """A fresh random delimiter for one request, e.g. ``"SOURCE-3F2A9C1D0B7E"``.

    Retrieved text is fenced as ``<<<DELIM>>> ... <<</DELIM>>>``; since a document cannot
    guess the delimiter of a future request, it cannot forge a closing marker.
    """
    return _DELIMITER_PREFIX + secrets.token_hex(6).upper()


def _normalize_name(name: str) -> str:
    return name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else name


def _strip_blank_lines(text: str) -> str:
    """Drop leading and trailing blank lines and trailing whitespace; keep everything inside.

    Splits on ``\n`` only: ``str.splitlines`` would also split chunk text on ``\r``, ``\x0c``...
    """
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines).rstrip()


class Prompts:
    """A set of prompt templates: your overrides, then your directory, then the built-ins.

    Args:
        directory: a folder of ``<name>.j2`` files searched before the built-in templates.
            It may also hold ``_macros.j2`` to change how chunks are shown everywhere.
        overrides: ``{name: template source}``, highest priority (``"answer"`` or ``"answer.j2"``).
    """

    def __init__(
        self,
        directory: str | Path | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        self.builtin_directory: Path = resource_dir("prompts")
        self.directory: Path | None = None
        if directory is not None:
            self.directory = Path(directory).expanduser()
            if not self.directory.is_dir():
                raise FileNotFoundError(f"prompt template directory not found: {self.directory}")
        self.overrides: dict[str, str] = {
            _normalize_name(name): source for name, source in (overrides or {}).items()
        }

        builtin = jinja2.FileSystemLoader(self.builtin_directory)
        loaders: list[jinja2.BaseLoader] = []
        if self.overrides:
            loaders.append(jinja2.DictLoader({n + _SUFFIX: s for n, s in self.overrides.items()}))
        if self.directory is not None:
            loaders.append(jinja2.FileSystemLoader(self.directory))
        loaders.append(jinja2.PrefixLoader({_BUILTIN_PREFIX: builtin}, delimiter="/"))
        loaders.append(builtin)
        self.environment = jinja2.Environment(
            loader=jinja2.ChoiceLoader(loaders),
            undefined=jinja2.StrictUndefined,
            autoescape=False,  # plain-text prompts, not HTML
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )

    def __repr__(self) -> str:
        return (
            f"Prompts(directory={str(self.directory) if self.directory else None!r}, "
            f"overrides={sorted(self.overrides)!r})"
        )

    def names(self) -> tuple[str, ...]:
        """Names of the prompts available: the built-ins, then any extra user templates."""
        extra: set[str] = set(self.overrides)
        if self.directory is not None:
            extra.update(p.stem for p in self.directory.glob("*" + _SUFFIX))
        extra = {n for n in extra if n not in PROMPT_NAMES and not n.startswith("_")}
        return PROMPT_NAMES + tuple(sorted(extra))

    def _template(self, name: str) -> jinja2.Template:
        name = _normalize_name(name)
        if not name or name.startswith("_") or "/" in name or "\\" in name:
            raise KeyError(self._unknown(name))
        try:
            return self.environment.get_template(name + _SUFFIX)
        except jinja2.TemplateNotFound as exc:
            if exc.name != name + _SUFFIX:
                raise  # the template exists but imports/extends a missing one
            raise KeyError(self._unknown(name)) from None

    def _unknown(self, name: str) -> str:
        return f"unknown prompt {name!r}; valid names: {', '.join(self.names())}"

    def source(self, name: str) -> str:
        """The template text actually used for ``name`` (override, your file, or built-in)."""
        template = self._template(name)
        loader = self.environment.loader
        assert loader is not None
        text, _filename, _uptodate = loader.get_source(self.environment, template.name or name + _SUFFIX)
        return text

    def origin(self, name: str) -> str:
        """Where the template for ``name`` comes from: ``"override"`` or its file path."""
        template = self._template(name)
        if template.filename is None or _normalize_name(name) in self.overrides:
            return "override"
        return template.filename

    def render(self, name: str, /, **variables: Any) -> list[Message]:
        """Render prompt ``name`` to chat messages ``[{"role": ..., "content": ...}, ...]``.

        The system message is left out when its block is absent or renders empty. Extra
        variables are ignored; a missing one raises :class:`TypeError`.
        """
        template = self._template(name)
        try:
            context = template.new_context(dict(variables))
            # Running the root function registers the blocks of the whole `extends` chain
            # (most derived first) in ``context.blocks`` and the template's top-level
            # ``set``/``import`` variables in the context.
            whole = "".join(template.root_render_func(context))
            blocks = context.blocks
            system = "".join(blocks["system"][0](context)) if "system" in blocks else ""
            if "user" in blocks:
                user = "".join(blocks["user"][0](context))
            elif not blocks:
                user = whole  # a template without blocks is a bare user message
            else:
                raise ValueError(f"prompt {name!r} has no {{% block user %}}")
        except jinja2.UndefinedError as exc:
            raise TypeError(self._missing_message(name, exc)) from exc

        messages: list[Message] = []
        system = _strip_blank_lines(system)
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": _strip_blank_lines(user)})
        return messages

    @staticmethod
    def _missing_message(name: str, exc: jinja2.UndefinedError) -> str:
        name = _normalize_name(name)
        match = _UNDEFINED_RE.fullmatch(exc.message or "")
        if match:
            return f"prompt {name!r} needs variable {match.group(1)!r}, which was not passed"
        return f"prompt {name!r} needs a variable or attribute that is missing: {exc.message}"

    def format_chunk(self, chunk: Any, delimiter: str) -> str:
        """One chunk fenced by ``delimiter``, exactly as the prompts show it (``_macros.j2``).

        Use it to build the ``context`` of the answer prompt.
        """
        macros = self.environment.get_template("_macros.j2").module
        try:
            return str(macros.chunk_block(chunk, delimiter))  # type: ignore[attr-defined]
        except jinja2.UndefinedError as exc:
            raise TypeError(f"chunk is missing an attribute: {exc}") from exc

    def format_chunks(self, chunks: Iterable[Any], delimiter: str) -> str:
        """Several fenced chunks separated by blank lines (the answer prompt's ``context``)."""
        return "\n\n".join(self.format_chunk(chunk, delimiter) for chunk in chunks)


@functools.cache
def default_prompts() -> Prompts:
    """The shared :class:`Prompts` with only the built-in templates."""
    return Prompts()


def render(name: str, /, *, prompts: Prompts | None = None, **variables: Any) -> list[Message]:
    """Render prompt ``name`` with ``prompts`` (default: the built-ins). See :meth:`Prompts.render`."""
    return (prompts or default_prompts()).render(name, **variables)


def format_chunk(chunk: Any, delimiter: str, *, prompts: Prompts | None = None) -> str:
    """See :meth:`Prompts.format_chunk`."""
    return (prompts or default_prompts()).format_chunk(chunk, delimiter)


def format_chunks(chunks: Iterable[Any], delimiter: str, *, prompts: Prompts | None = None) -> str:
    """See :meth:`Prompts.format_chunks`."""
    return (prompts or default_prompts()).format_chunks(chunks, delimiter)


def chunk_views(hits: Iterable[Hit]) -> list[dict[str, Any]]:
    """What prompts see of a chunk: its citation label and provenance."""
    return [
        {"label": h.chunk_id, "text": h.text, "source": h.source, "section": h.section, "page": h.page}
        for h in hits
    ]
