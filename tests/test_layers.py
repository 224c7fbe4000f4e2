"""The README's architecture table is true: every module of es_search is listed in one
layer, and its imports of other es_search modules go to its own layer or below."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_layers(text: str) -> dict[str, int]:
    """Module or subpackage name -> its layer in the README's layer table (0: bottom); a
    row whose layer cell is empty continues the layer above it."""
    table = text[text.index("| layer | modules |"):].split("\n\n")[0].splitlines()[2:]
    layers: dict[str, int] = {}
    layer = -1
    for line in table:
        cells = line.split("|")
        layer += bool(cells[1].strip())
        for name in re.findall(r"`([a-z_]+(?:\.py|/))`", cells[2]):
            layers.setdefault(name.rstrip("/").removesuffix(".py"), layer)
    return layers


def violations(package: Path, layers: dict[str, int]) -> tuple[set, list]:
    """(modules not in ``layers``, imports that go up a layer) in ``package``."""
    def top(path: Path) -> str:  # package/x.py -> x; package/sub/... -> sub
        return path.relative_to(package).parts[0].removesuffix(".py")

    missing, upward = set(), []
    for path in sorted(package.rglob("*.py")):
        source = top(path)
        if source in ("__init__", "__main__"):
            continue
        if source not in layers:
            missing.add(source)
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            base = path.parent
            for _ in range(node.level - 1):
                base = base.parent
            targets = ([base / node.module.replace(".", "/")] if node.module else
                       [base / alias.name for alias in node.names])
            for target in map(top, targets):
                if target in (source, "__init__", "__version__"):
                    continue
                if target not in layers:
                    missing.add(target)
                elif layers[target] > layers[source]:
                    upward.append(f"{path.name}:{node.lineno} ({source}) imports {target}")
    return missing, upward


def test_every_module_is_in_a_layer_and_imports_flow_down():
    layers = readme_layers((ROOT / "README.md").read_text())
    missing, upward = violations(ROOT / "es_search", layers)
    assert not missing, f"modules missing from the README's layer table: {sorted(missing)}"
    stale = [name for name in layers if not (ROOT / "es_search" / f"{name}.py").is_file()
             and not (ROOT / "es_search" / name).is_dir()]
    assert not stale, f"the README's layer table lists modules that do not exist: {stale}"
    assert not upward, "imports a layer above:\n" + "\n".join(upward)


def test_the_check_finds_an_upward_import_and_an_unlisted_module(tmp_path):
    (tmp_path / "low.py").write_text("from .high import thing\n")
    (tmp_path / "high.py").write_text("from .low import other\nfrom . import new\n")
    (tmp_path / "new.py").write_text("")
    (tmp_path / "mid.py").write_text("from .low import thing\n")
    table = ("| layer | modules |\n|---|---|\n| bottom | `low.py` |\n| | `mid.py` |\n"
             "| top | `high.py` |\n\nafter")
    assert readme_layers(table) == {"low": 0, "mid": 0, "high": 1}  # a row continues
    missing, upward = violations(tmp_path, readme_layers(table))
    assert missing == {"new"}
    assert upward == ["low.py:1 (low) imports high"]


def test_code_metrics_counts_cycles_through_imports_inside_functions(tmp_path, capsys):
    """benchmarks/code_metrics.py: a cycle closed by an import inside a function counts;
    an error guard counts as error code."""
    import runpy
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import g\n\n\ndef f(x):\n    if x < 0:\n"
                                  "        raise ValueError('x must be >= 0')\n    return g(x)\n")
    (package / "b.py").write_text("def g(x):\n    from .a import f\n    return x\n")
    metrics = runpy.run_path(str(ROOT / "benchmarks" / "code_metrics.py"), run_name="x")
    assert metrics["main"]([str(package)]) == 0
    printed = capsys.readouterr().out
    assert "import cycles: 1\n  pkg.a <-> pkg.b\n" in printed
    assert "error and warning code: 2 of 8 code lines" in printed
