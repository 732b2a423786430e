"""The site's writer: files written only when their content changed, pages rendered
from the jinja2 templates, and what was written and kept (for the manifest)."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from blocklab import __version__, units
from blocklab.report import jsontext, manifest, shape

MARKER = ".blocklab-site"


WriterState = tuple[dict[str, int], set[str], int, int]


class Writer:
    """Writes the site's files, leaving a file alone when its content is unchanged, and
    records what it wrote and kept (HTML pages) and every file of the site."""

    def __init__(self, out: Path, old: manifest.Manifest):
        self.out = out
        self.old = old
        self.new = manifest.Manifest(old.version)
        self.env = _environment()
        self.templates: dict[str, jinja2.Template] = {}
        self.written = self.kept = 0
        self.files: set[str] = {MARKER, manifest.MANIFEST}
        self.other_bytes = 0
        self.n_exp = self.n_runs = 0
        self.fresh = not old.pages  # a new, empty directory: nothing to compare or keep
        self.dirs: set[Path] = set()

    def mkdir(self, path: Path) -> None:
        if path not in self.dirs:
            path.mkdir(parents=True, exist_ok=True)
            self.dirs.add(path)

    def page(self, rel: str, template: str, **context: Any) -> None:
        depth = rel.count("/")
        ctx = {"root": "../" * depth, "version": __version__, "charts": True}
        ctx.update(context)
        if template not in self.templates:  # looked up once a build, not once a page
            self.templates[template] = self.env.get_template(template)
        self.put(rel, self.templates[template].render(**ctx))

    def put(self, rel: str, text: str) -> None:
        """Write `rel` unless it already holds exactly `text`."""
        body = text.encode()
        path = self.out / rel
        self.files.add(rel)
        if rel.endswith(".html"):
            self.new.pages[rel] = len(body)
        else:
            self.other_bytes += len(body)
        self.written += rel.endswith(".html")
        self.mkdir(path.parent)
        if self.fresh:
            path.write_bytes(body)
            return
        try:
            same = path.stat().st_size == len(body) and path.read_bytes() == body
        except OSError:
            same = False
        if same:
            self.written -= rel.endswith(".html")
            self.kept += rel.endswith(".html")
            return
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(body)
        tmp.replace(path)

    def keep(self, rel: str, *, present: bool = False) -> bool:
        """Keep an existing page as it is; False when it is missing (`present`: the
        caller has seen it there, in a listing of its directory: files_in)."""
        size = self.old.pages.get(rel)
        if size is None or not (present or (self.out / rel).is_file()):
            return False
        self.files.add(rel)
        self.new.pages[rel] = size
        self.kept += 1
        return True

    def files_in(self, rel_dir: str) -> set[str]:
        """The names of the regular files in a directory of the site (none when it is
        missing): one listing, not a stat a file (10,000 run pages)."""
        try:
            with os.scandir(self.out / rel_dir) as entries:
                return {e.name for e in entries if e.is_file()}
        except OSError:
            return set()

    def file(self, rel: str) -> Path:
        """A non-page file the caller writes itself (CSV, raw files)."""
        self.files.add(rel)
        path = self.out / rel
        self.mkdir(path.parent)
        return path

    def reset(self) -> None:
        """Forget what was written (a worker process reports only its own part)."""
        self.new.pages, self.files, self.written, self.kept = {}, set(), 0, 0

    def state(self) -> WriterState:
        return self.new.pages, self.files, self.written, self.kept

    def merge(self, state: WriterState) -> None:
        pages, files, written, kept = state
        self.new.pages.update(pages)
        self.files |= files
        self.written += written
        self.kept += kept

    def total_bytes(self) -> int:
        return sum(self.new.pages.values()) + sum(
            (self.out / rel).stat().st_size
            for rel in self.files
            if not rel.endswith(".html") and not rel.endswith("/") and (self.out / rel).is_file()
        )

    def finish(self) -> None:
        self.new.save(self.out)


@functools.cache
def _environment() -> jinja2.Environment:
    """The templates' environment, one a process (a template is compiled once, and again
    only when its file changes), its compiled templates cached on disk between processes
    (jinja's bytecode cache, in a directory of the user's own under the temporary
    directory): compiling them was a tenth of an update's time."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("blocklab.report", "templates"),
        bytecode_cache=_bytecode_cache(),
        autoescape=jinja2.select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = shape.fmt_num
    env.filters["when"] = shape.fmt_when
    env.filters["dim"] = lambda value, dim: shape.dim_label(dim, value)
    env.filters["ratio"] = lambda x: "–" if x is None else f"{x:.3f}"
    env.filters["vs"] = shape.vs_reference
    env.filters["pval"] = lambda x: "–" if x is None else ("< 0.001" if x < 0.001 else f"{x:.3f}")
    env.filters["tojson"] = _tojson
    env.filters["bytes"] = lambda x: units.NO_VALUE if x is None else units.fmt_bytes(x)
    return env


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """jinja's own, in `_jinja2-cache-<uid>` under the temporary directory; None where that
    directory is not safe (not the user's own) or cannot be made: compiled each time."""
    try:
        return jinja2.FileSystemBytecodeCache()
    except (OSError, RuntimeError):
        return None


def _tojson(value: Any, indent: int | None = None) -> Markup:
    """JSON safe inside HTML (as jinja's tojson), compact (blocklab.report.jsontext), or
    indented by the standard library's encoder."""
    if indent:
        text = json.dumps(value, indent=indent, separators=(",", ": "), default=str)
    else:
        text = jsontext.text(value)
    return Markup(
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("'", "\\u0027")
    )
