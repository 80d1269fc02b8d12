"""The shape of ``pipelines/``, pinned: a neutral core, the tandem turn on it, the rungs in an annex.

* the core (``pipelines/core``) imports no domain pack and no pipeline family;
* the ``tandem`` turn imports no family and no pack — the ``Domain`` protocol alone;
* the import graph of ``pipelines/`` — every import, at module level and inside functions, so a
  function-level import cannot hide a loop — has no circle;
* no arrow runs back up the layers: foundation < kernels (``sgc``) < core < the pack API
  (``pipelines.domain``) < packs < families (``tandem``, ``annex``) < the kind registry;
* no second copy of a mechanism: no run of six significant lines stands twice in ``pipelines/``
  (data tables aside).

The checkers are tested too: a planted circle, arrow and copy must be found.
"""

from __future__ import annotations

import ast
import hashlib
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = ROOT / "pipelines"


# -- the import graph ---------------------------------------------------------------------------


def modules(root: Path, package: str = "pipelines") -> dict[str, Path]:
    """Dotted module name → file, for every module of ``package`` under ``root``."""
    out: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str | None:
    if node.level == 0:
        return node.module
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def graph(root: Path, package: str = "pipelines") -> dict[str, set[str]]:
    """Module → the modules of the package it imports (anywhere in the file)."""
    mods = modules(root, package)
    edges: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, node, path.name == "__init__.py")
                if base is None:
                    continue
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != mod:
                    edges[mod].add(target)
        edges.setdefault(mod, set())
    return dict(edges)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


#: The layers, lowest first: a module may import its own layer and the ones below (families: only their own).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("kernels", ("pipelines.sgc",)),
    ("core", ("pipelines.core",)),
    ("pack api", ("pipelines.domain",)),
    ("packs", ("pipelines.domains",)),
    ("families", ("pipelines.tandem", "pipelines.annex")),
    ("registry", ("pipelines.registry",)),
]
FAMILIES = ("pipelines.tandem", "pipelines.annex")


def _under(mod: str, prefix: str) -> bool:
    return mod == prefix or mod.startswith(prefix + ".")


def layer(mod: str) -> int:
    """The layer of a module (0: the foundation, every module not named in :data:`LAYERS`)."""
    for i, (_, prefixes) in enumerate(LAYERS, start=1):
        if any(_under(mod, p) for p in prefixes):
            return i
    return 0


def family(mod: str) -> str | None:
    return next((f for f in FAMILIES if _under(mod, f)), None)


def arrows_up(edges: dict[str, set[str]]) -> list[str]:
    """Imports of a higher layer, or of another family."""
    bad = []
    for a in sorted(edges):
        for b in sorted(edges[a]):
            if layer(b) > layer(a) or (family(a) and family(b) and family(a) != family(b)):
                bad.append(f"{a} -> {b}")
    return bad


def test_the_graph_checker_finds_a_circle_and_an_arrow_up(tmp_path: Path) -> None:
    pkg = tmp_path / "pipelines"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("from pipelines.core import b\n")
    (pkg / "core" / "b.py").write_text("def f():\n    from . import a\n    import pipelines.tandem.x\n")
    (pkg / "tandem").mkdir()
    (pkg / "tandem" / "__init__.py").write_text("")
    (pkg / "tandem" / "x.py").write_text("from pipelines.annex import y\n")
    (pkg / "annex").mkdir()
    (pkg / "annex" / "__init__.py").write_text("")
    (pkg / "annex" / "y.py").write_text("")
    edges = graph(tmp_path)
    assert cycles(edges) == [["pipelines.core.a", "pipelines.core.b"]]  # through a function-level import
    assert arrows_up(edges) == ["pipelines.core.b -> pipelines.tandem.x",
                                "pipelines.tandem.x -> pipelines.annex.y"]


def test_the_import_graph_of_pipelines_has_no_circle() -> None:
    assert cycles(graph(ROOT)) == []


def test_no_arrow_runs_back_up_the_layers() -> None:
    assert arrows_up(graph(ROOT)) == []


def test_the_core_imports_no_pack_and_no_family() -> None:
    edges = graph(ROOT)
    bad = [f"{a} -> {b}" for a in edges if _under(a, "pipelines.core") for b in edges[a]
           if layer(b) >= layer("pipelines.domains")]
    assert bad == []


def test_the_tandem_turn_imports_no_family_and_no_pack() -> None:
    edges = graph(ROOT)
    tandem = [a for a in edges if _under(a, "pipelines.tandem")]
    assert tandem, "the tandem package is where the layout says"
    bad = [f"{a} -> {b}" for a in tandem for b in edges[a]
           if _under(b, "pipelines.annex") or _under(b, "pipelines.domains") or b == "pipelines.registry"]
    assert bad == []


#: Names that would tie ``serve/`` to one pack: the built-in packs, their kinds, their data.
DOMAIN_WORDS = re.compile(r"\b(support|coach|retail|airline|tau2|order_id|creature|pokemon)\b", re.I)
#: Where serve/ may name a pack: the scaffold (it writes a new pack, named by the user).
SERVE_EXEMPT = {"serve.scaffold"}
#: The evaluation harness and the load generator read tau2-format tasks of any pack that has them: there,
#: ``tau2`` names a task format, not a pack (every other pack word is still refused).
SERVE_HARNESS = ("serve.eval", "serve.loadtest", "serve.cost")
HARNESS_WORDS = re.compile(r"\b(support|coach|retail|airline|order_id|creature|pokemon)\b", re.I)


def serve_domain_names(root: Path) -> list[str]:
    """Imports of a pack's modules (``pipelines.domains.<pack>``) and string literals naming a pack in serve/."""
    packs = {m for m in modules(root) if m.startswith("pipelines.domains.")}
    allowed = {"pipelines.domains.conformance", "pipelines.domains.testing"}
    found = []
    for mod, path in modules(root, "serve").items():
        if mod in SERVE_EXEMPT or "protos" in mod:
            continue
        words = HARNESS_WORDS if any(_under(mod, h) for h in SERVE_HARNESS) else DOMAIN_WORDS
        tree = ast.parse(path.read_text(), filename=str(path))
        docstrings = {id(p.body[0].value) for p in ast.walk(tree)
                      if isinstance(p, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and p.body and isinstance(p.body[0], ast.Expr)}
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if any(_under(name, p) for p in packs - allowed) and not any(_under(name, a) for a in allowed):
                    found.append(f"{mod}:{node.lineno} imports {name}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) not in docstrings and words.search(node.value):
                    found.append(f"{mod}:{node.lineno} names {words.search(node.value).group(0)!r}")
    return sorted(set(found))


def test_the_serve_checker_finds_an_import_and_a_literal(tmp_path: Path) -> None:
    (tmp_path / "pipelines" / "domains" / "shop").mkdir(parents=True)
    (tmp_path / "pipelines" / "domains" / "shop" / "__init__.py").write_text("")
    (tmp_path / "serve").mkdir()
    (tmp_path / "serve" / "a.py").write_text('"""Serves the support pack (a docstring may say so)."""\n'
                                             "from pipelines.domains.shop import x\n")
    (tmp_path / "serve" / "b.py").write_text('NAME = "coach"\nOK = "not supported"\n')
    assert serve_domain_names(tmp_path) == ["serve.a:2 imports pipelines.domains.shop",
                                            "serve.a:2 imports pipelines.domains.shop.x",
                                            "serve.b:1 names 'coach'"]


def test_serve_names_no_domain() -> None:
    """serve/ reaches a pack only by its configured name, through the registry (pipelines.domains)."""
    assert serve_domain_names(ROOT) == []


# -- copies ---------------------------------------------------------------------------------------

WINDOW = 6
_IMPORT = re.compile(r"^(from\s+\S+\s+import\b|import\s)")

#: Runs that may repeat: data tables and declarations whose repetition is their content.
ALLOWED: dict[str, str] = {
    "pipelines/turn.py": "start() and run() are the runner's two entry points with the same keyword parameters",
    "pipelines/errors.py": "the error table: one class per row",
    "pipelines/domains/": "domain data: tool specs, cards, help articles, world models",
}


def significant(path: Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of the lines that carry code: no blank, comment, import or bracket-only line,
    whitespace folded."""
    out = []
    for n, raw in enumerate(path.read_text().splitlines(), start=1):
        line = " ".join(raw.strip().split())
        if not line or line.startswith("#") or _IMPORT.match(line) or sum(c.isalnum() for c in line) < 3:
            continue
        out.append((n, line))
    return out


def copies(files: list[Path], root: Path) -> list[str]:
    """Every run of :data:`WINDOW` significant lines that stands in two places (non-overlapping)."""
    seen: dict[str, tuple[str, int]] = {}
    out: list[str] = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        lines = significant(path)
        for i in range(len(lines) - WINDOW + 1):
            key = hashlib.sha1("\n".join(t for _, t in lines[i:i + WINDOW]).encode()).hexdigest()
            start = lines[i][0]
            first = seen.get(key)
            if first is None:
                seen[key] = (rel, start)
            elif first[0] != rel or abs(first[1] - start) >= WINDOW:
                out.append(f"{rel}:{start} repeats {first[0]}:{first[1]}")
    return out


def _allowed(line: str) -> bool:
    a, _, b = line.partition(" repeats ")
    return all(any(x.startswith(prefix) for prefix in ALLOWED) for x in (a, b))


def test_the_copy_finder_finds_a_copied_run(tmp_path: Path) -> None:
    body = "\n".join(f"value_{i} = compute({i}, factor)" for i in range(7))
    (tmp_path / "one.py").write_text("import os\n\n" + body + "\n")
    (tmp_path / "two.py").write_text("# a comment\n" + body.replace("    ", "\t") + "\nother = 1\n")
    (tmp_path / "three.py").write_text("\n".join(f"value_{i} = compute({i}, factor)" for i in range(5)) + "\n")
    found = copies(sorted(tmp_path.glob("*.py")), tmp_path)
    assert found and all(f.startswith("two.py") and "one.py" in f for f in found)


def _imports(path: Path) -> list[str]:
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
    return out


#: The libraries docs/architecture.md says ``pipelines/`` imports besides the standard library.
PIPELINES_LIBRARIES = {"pydantic": "pydantic", "pydantic_core": "pydantic", "opentelemetry": "OpenTelemetry",
                       "httpx": "httpx", "yaml": "PyYAML", "regex": "regex", "numpy": "numpy",
                       "phonenumbers": "phonenumbers"}


def test_pipelines_imports_only_the_libraries_the_architecture_names() -> None:
    found = {name.split(".")[0] for path in PIPELINES.rglob("*.py") for name in _imports(path)}
    third_party = {n for n in found if n not in sys.stdlib_module_names and n != "pipelines"}
    assert third_party <= set(PIPELINES_LIBRARIES), sorted(third_party - set(PIPELINES_LIBRARIES))
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert [lib for lib in set(PIPELINES_LIBRARIES.values()) if lib not in doc] == []


def test_only_the_registry_imports_the_annex() -> None:
    """In pipelines/ and serve/, the annex is reached through the kind registry alone (scripts that benchmark a
    rung and the tests may build one directly)."""
    bad = []
    for package in ("pipelines", "serve"):
        for mod, path in modules(ROOT, package).items():
            if _under(mod, "pipelines.annex") or mod == "pipelines.registry":
                continue
            bad += [f"{mod} imports {n}" for n in _imports(path) if _under(n, "pipelines.annex")]
    assert bad == []


def test_examples_import_only_the_pack_api() -> None:
    """A pack's code imports ``pipelines.domain`` alone; its tests also the conformance base class, the pack
    registry, the app (``serve``) and Tandem's test helpers."""
    bad = []
    for path in sorted((ROOT / "examples").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        in_tests = "/tests/" in rel
        for name in _imports(path):
            if not (_under(name, "pipelines") or _under(name, "serve") or _under(name, "tests")):
                continue
            allowed = name == "pipelines.domain" or (in_tests and (
                _under(name, "pipelines.domains") or _under(name, "serve") or _under(name, "tests")))
            if not allowed:
                bad.append(f"{rel} imports {name}")
    assert bad == []


def test_no_mechanism_stands_twice_in_pipelines() -> None:
    found = [f for f in copies(sorted(PIPELINES.rglob("*.py")), ROOT) if not _allowed(f)]
    assert found == []
