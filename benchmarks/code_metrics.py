"""The size targets of es_search/ (issue 31), measured: lines, modules over 400 lines,
import cycles (imports inside functions counted), the share of code lines that word or
handle an error (raise statements, except handlers, `if ...: raise` guards, warning calls,
exception and warning classes), docstrings, comments and blank lines left out, and the
size of the README beside the package.

    python benchmarks/code_metrics.py [PACKAGE_DIR]
"""
from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path, tree: ast.AST, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports, anywhere in it."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return found


def code_and_error_lines(source: str, tree: ast.AST) -> tuple[set[int], set[int]]:
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    code = set()
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip:
            code.update(range(token.start[0], token.end[0] + 1))
    code -= docstrings
    errors = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            hit = (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) \
                in ("warn", "warn_user", "showwarning")
        elif isinstance(node, ast.If):
            hit = not node.orelse and all(isinstance(b, ast.Raise) for b in node.body)
        elif isinstance(node, ast.ClassDef):
            hit = any(getattr(b, "id", getattr(b, "attr", "")).endswith(
                ("Error", "Warning", "Exception")) for b in node.bases)
        else:
            hit = isinstance(node, (ast.Raise, ast.ExceptHandler))
        if hit:
            errors.update(range(node.lineno, node.end_lineno + 1))
    return code, errors & code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", nargs="?",  # es_search/ beside benchmarks/, from anywhere
                        default=str(Path(__file__).resolve().parents[1] / "es_search"),
                        help="the package folder to measure (default: es_search)")
    root = Path(parser.parse_args(argv).package).resolve()
    paths = sorted(root.rglob("*.py"))
    if not paths:
        parser.error(f"{root} holds no .py file: give a package folder")
    modules = {module_name(p, root) for p in paths}
    graph, lines, code_total, error_total, big = {}, 0, 0, 0, []
    for path in paths:
        source = path.read_text()
        tree = ast.parse(source)
        graph[module_name(path, root)] = imports(path, root, tree, modules)
        count = len(source.splitlines())
        lines += count
        if count > 400:
            big.append(f"{path} ({count})")
        code, errors = code_and_error_lines(source, tree)
        code_total += len(code)
        error_total += len(errors)
    print(f"lines: {lines} in {len(paths)} files (target <= 10,000)")
    print(f"modules over 400 lines: {len(big)}" + "".join(f"\n  {b}" for b in big))
    found = cycles(graph)
    print(f"import cycles: {len(found)}" + "".join(f"\n  {' <-> '.join(c)}" for c in found))
    print(f"error and warning code: {error_total} of {code_total} code lines, "
          f"{100 * error_total / code_total:.2f}% (target < 12%)")
    readme = root.parent / "README.md"
    if readme.is_file():
        print(f"README.md: {readme.stat().st_size:,} bytes (target <= 25,000)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
