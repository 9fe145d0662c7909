"""Layers point one way: core (``agentstate_reducer``) <- ``checkpointers`` <- ``checkpointers.cli``
and benchmarks. Checked on the source with ``ast``, so an import hidden inside a function counts."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "agentstate_reducer"
SAVERS = ROOT / "checkpointers"


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports for the type checker only)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def imports(path: Path, *, runtime_only: bool = False, root: Path = ROOT) -> Iterator[tuple[int, str]]:
    """``(line, absolute module)`` of every import in ``path``, at any depth, and of every
    ``import_module("...")`` call with a literal name."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_nodes(tree) if runtime_only else set()
    name = _module_name(path, root) if path.is_relative_to(root) else path.stem
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
                if node.module is None:
                    for alias in node.names:
                        yield node.lineno, f"{target}.{alias.name}"
                    continue
                yield node.lineno, target
            else:
                yield node.lineno, node.module or ""
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def _violations(folder: Path, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.py")):
        for line, module in imports(path):
            if module in forbidden or module.startswith(tuple(f"{name}." for name in forbidden)):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return found


def test_the_core_imports_nothing_above_it() -> None:
    assert _violations(CORE, ("checkpointers", "benchmarks", "tests")) == []


INTEGRATIONS = CORE / "integrations"
#: the first import paths of two integrations, kept working (they re-export the modules)
SHIMS = ("agentstate_reducer/middleware/__init__.py", "agentstate_reducer/sessions.py")


def test_only_the_integrations_reach_the_integrations() -> None:
    """The core (everything but ``integrations``) never imports an integration; the two old
    import paths are the only modules outside that re-export one."""
    found = [
        v
        for v in _violations(CORE, ("agentstate_reducer.integrations",))
        if not v.startswith("agentstate_reducer/integrations/") and not v.startswith(SHIMS)
    ]
    assert found == []


def test_integrations_share_only_the_core_and_their_common_module() -> None:
    """A framework module imports the core, ``integrations._common``/``_bounded`` and its own
    framework's modules (``openai_agents_usage`` is the OpenAI Agents SDK's too), never another
    framework's integration (each is installed on its own)."""
    found = []
    frameworks = {p.stem for p in INTEGRATIONS.glob("*.py")}
    frameworks |= {p.name for p in INTEGRATIONS.iterdir() if p.is_dir()}
    for path in sorted(INTEGRATIONS.rglob("*.py")):
        name = _module_name(path).split(".")
        own = name[2] if len(name) > 2 else ""
        owner = min((f for f in frameworks if own == f or own.startswith(f + "_")), key=len, default=own)
        for line, module in imports(path):
            parts = module.split(".")
            if parts[:2] != ["agentstate_reducer", "integrations"] or len(parts) < 3:
                continue
            if parts[2] not in ("_common", "_bounded", own, owner):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert found == []


def test_savers_do_not_import_the_cli_or_benchmarks() -> None:
    found = [
        v
        for v in _violations(SAVERS, ("checkpointers.cli", "benchmarks", "tests"))
        if not v.startswith("checkpointers/cli/")
    ]
    assert found == []


def _import_graph(folders: tuple[Path, ...], root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of ``folders`` it imports (at any depth, ``TYPE_CHECKING`` included)."""
    names = {_module_name(p, root): p for folder in folders for p in folder.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        targets = set()
        for _, module in imports(path, root=root):
            # "from . import x" names a module or a name: resolve to the longest known module
            while module and module not in names:
                module = module.rpartition(".")[0]
            if module and module != name:
                targets.add(module)
        graph[name] = targets
    return graph


def _cycles(*folders: Path, root: Path = ROOT) -> list[list[str]]:
    """Every import cycle among the modules of ``folders`` (one graph for all of them), each as
    the modules along it, the first repeated at the end."""
    graph = _import_graph(folders, root)
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


@pytest.mark.parametrize(
    "folders", [(CORE,), (SAVERS,), (CORE, SAVERS)], ids=["core", "checkpointers", "together"]
)
def test_no_package_has_an_import_cycle(folders: tuple[Path, ...]) -> None:
    """Imports for the type checker count too: a cycle hidden behind TYPE_CHECKING or inside a
    function is still two modules that cannot be read or changed apart."""
    assert _cycles(*folders) == []


def test_the_cycle_check_finds_a_cycle_inside_a_function(tmp_path: Path) -> None:
    """The check can fail: two modules of a package importing each other (one of them inside a
    function) are reported, with the way round."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def f():\n    from .a import g\n")
    assert _cycles(package, root=tmp_path) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_importing_the_core_loads_no_framework() -> None:
    code = (
        "import sys, agentstate_reducer\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('checkpointers', 'langgraph', 'langchain', 'langchain_core', 'openai', 'anthropic', 'agents',"
        " 'crewai', 'pydantic_ai', 'google', 'autogen_core', 'autogen_agentchat', 'autogen_ext',"
        " 'agent_framework', 'llama_index', 'smolagents', 'agno'))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_checker_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    """The check can fail: a core module importing checkpointers inside a function is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from checkpointers.saver import ReducingCheckpointSaver\n")
    assert [m for _, m in imports(bad)] == ["checkpointers.saver"]
    lazy = tmp_path / "lazy.py"
    lazy.write_text("import importlib\n\ndef g():\n    return importlib.import_module('checkpointers.cli')\n")
    assert "checkpointers.cli" in [m for _, m in imports(lazy)]


def _module_level_imports(path: Path) -> list[tuple[int, str]]:
    """Imports run when ``path`` is imported: its top-level statements (not functions, not
    ``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[int, str]] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append((node.lineno, node.module or ""))
    return found


def test_the_cli_starts_without_its_optional_dependencies() -> None:
    """The CLI's modules import langgraph, drivers and the savers only inside the commands that need
    them, so ``--help`` and the missing-extra lines work on a base install. ``demo_graph`` is the
    exception: the demo imports it when it runs."""
    optional = ("langgraph", "langchain_core", "langchain", "psycopg", "azure", "matplotlib", "tiktoken")
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in sorted((SAVERS / "cli").glob("*.py"))
        if path.name != "demo_graph.py"
        for line, module in _module_level_imports(path)
        if module.split(".")[0] in optional
        or (module.startswith("checkpointers") and not module.startswith("checkpointers.cli"))
    ]
    assert found == []


#: the column path: everything in it equals the reference, which must stand without it
FAST = "agentstate_reducer._columns"
#: the reference path (modules and packages): the reducer chooses between it and ``FAST``
REFERENCE = tuple(
    f"agentstate_reducer.{name}"
    for name in ("planner", "messages", "tokens", "summary", "merge", "config", "results", "langgraph")
)


def _reaches(start: str, graph: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _core_graph() -> dict[str, set[str]]:
    """Each core module's imports of core modules (a name imported from a package resolves to
    the longest module it names), at any depth, for the type checker too."""
    names = {_module_name(p): p for p in CORE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        targets = set()
        for _, module in imports(path):
            while module and module not in names:
                module = module.rpartition(".")[0]
            if module and module != name:
                targets.add(module)
        graph[name] = targets
    return graph


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _reference_reaching_fast(graph: dict[str, set[str]]) -> list[str]:
    reference = [n for n in graph if any(_in(n, r) for r in REFERENCE)]
    return sorted(
        f"{name} reaches {FAST}" for name in reference if any(_in(m, FAST) for m in _reaches(name, graph))
    )


def test_the_reference_path_imports_nothing_of_the_column_path() -> None:
    """The planner, the readers, the plain counter, the summaries and the merge stand without
    ``_columns``: only the reducer (and what wraps it) chooses the column path."""
    graph = _core_graph()
    assert FAST in graph and all(any(_in(n, r) for n in graph) for r in REFERENCE)
    assert _reference_reaching_fast(graph) == []


def test_the_reference_check_sees_a_reference_module_importing_the_column_path() -> None:
    """The check can fail: the planner importing a reader by columns is found."""
    graph = _core_graph()
    graph["agentstate_reducer.planner"] = {*graph["agentstate_reducer.planner"], f"{FAST}.bulk"}
    assert "agentstate_reducer.planner reaches agentstate_reducer._columns" in _reference_reaching_fast(graph)


def _unit(module: str) -> str:
    """The unit a module belongs to for the package check: its subpackage two levels down
    (``checkpointers.retention``, ``agentstate_reducer._columns``), else the module itself (a
    top-level module such as ``checkpointers._flow`` is a unit of its own, which its subpackages
    may share)."""
    parts = module.split(".")
    top = ROOT / parts[0]
    if len(parts) > 1 and (top / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def _package_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle among the units of ``graph`` (modules collapsed into their units)."""
    units: dict[str, set[str]] = {}
    for module, targets in graph.items():
        here = _unit(module)
        units.setdefault(here, set()).update(t for t in map(_unit, targets) if t != here)
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(units.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for node in sorted(units):
        if node not in state:
            visit(node, [node])
    return cycles


def test_no_two_packages_import_each_other() -> None:
    """Subpackages point one way: ``checkpointers.retention`` may import ``checkpointers.offload``
    (it drops blob references as it deletes), never the reverse; what composes two subpackages lives
    above both, and what they share (``_flow``, ``_sql``) in a module of its own."""
    assert _package_cycles(_import_graph((CORE, SAVERS))) == []


def test_the_package_check_finds_two_packages_importing_each_other() -> None:
    """The check can fail: two subpackages importing each other through different modules (no
    module-level cycle) are reported."""
    graph = {
        "checkpointers.offload.follow": {"checkpointers.retention.flows"},
        "checkpointers.retention.flows": set(),
        "checkpointers.retention.backends": {"checkpointers.offload.follow"},
        "checkpointers._flow": set(),
    }
    cycle = ["checkpointers.offload", "checkpointers.retention", "checkpointers.offload"]
    assert _package_cycles(graph) == [cycle]
