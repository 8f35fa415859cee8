"""
The layers of orchd's packages, written down once, and the check that the
imports under C{orchd/} follow them.

A package may import its own modules, packages of its own layer and of the
layers below it, never one above; the package graph has no cycle, even
within a layer; every package under C{orchd/} has its place in L{LAYERS}.
The imports are read from the source with C{ast}, at module level and
inside functions alike, relative imports resolved, so a lazy import cannot
hide an edge. The root package C{orchd} (its version) is below every layer
and imports nothing of orchd.
"""

import ast
import os

from twisted.trial.unittest import SynchronousTestCase

import orchd

#: The layer order, lowest first. Packages of one layer may import each
#: other (as long as the package graph has no cycle); a new package must be
#: placed here. C{docs/architecture.rst} describes the layers from this list.
LAYERS = [
    ("tls", "timing"),            # certificates and TLS; timers and per-second time text:
                                  # the leaf, imports nothing of orchd
    ("api",),                     # wire types, schemas, codecs, errors
    ("client",),                  # orchconfig files and HTTPS clients built from them
    ("storage",),                 # stores, watch caches, informers
    ("auth", "admission"),        # who is asking, may they, and admission plugins
    ("registry",),                # kinds, strategies, the generic store
    ("server", "controllers", "scheduler"),   # the HTTP API server; controllers and the
                                              # scheduler over the registry
    ("orchlet",),                 # the node agent
    ("app",),                     # composition root: config, PKI, the service tree
    ("testing",),                 # a control plane inside a test process (orchd.testing)
]

ROOT = "orchd"


def layer_of():
    """C{{package: layer index}} of L{LAYERS}."""
    return {package: index for index, layer in enumerate(LAYERS) for package in layer}


def modules(directory, root=ROOT):
    """
    C{(module name, path, is package)} of every Python file under C{directory},
    the package C{root}.
    """
    found = []
    for parent, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if os.path.exists(os.path.join(parent, d, "__init__.py")))
        relative = os.path.relpath(parent, directory)
        prefix = [root] + ([] if relative == os.curdir else relative.split(os.sep))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            if name == "__init__.py":
                found.append((".".join(prefix), os.path.join(parent, name), True))
            else:
                found.append((".".join(prefix + [name[:-3]]), os.path.join(parent, name), False))
    return found


def _resolve(module, is_package, level, name):
    """The absolute name of C{from <level dots><name> import ...} in C{module}."""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level - 1 > len(base) - 1:
        raise ValueError(f"{module}: relative import beyond the top-level package")
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imports(source, module, is_package, packages, root=ROOT):
    """
    C{(line, imported module)} for each import of C{root} or below in C{source}.

    Every C{import} and C{from ... import} counts, wherever it is (module
    level, functions, conditionals). C{from root import name} is an import of
    C{root.name} when C{name} is one of C{packages}, else of C{root} itself.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _resolve(module, is_package, node.level, node.module)
            else:
                base = node.module
            if base == root:
                targets = [f"{root}.{alias.name}" if alias.name in packages else root
                           for alias in node.names]
            else:
                targets = [base]
        else:
            continue
        found.extend((node.lineno, target) for target in targets
                     if target == root or target.startswith(root + "."))
    return found


def package_of(name, root=ROOT):
    """The package a module belongs to (C{orchd.auth.csr}: C{auth}); None for the root."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == root else None


def read_imports(directory, root=ROOT):
    """C{(module, line, imported module)} for every import of C{root} under C{directory}."""
    found = modules(directory, root)
    packages = {package_of(name, root) for name, _, _ in found} - {None}
    edges = []
    for name, path, is_package in found:
        with open(path, encoding="utf-8") as stream:
            source = stream.read()
        edges.extend((name, line, target)
                     for line, target in imports(source, name, is_package, packages, root))
    return edges


def violations(edges, layers, root=ROOT):
    """One line per import against C{layers} (a C{{package: index}})."""
    found = []
    for module, line, target in edges:
        importer, imported = package_of(module, root), package_of(target, root)
        if importer is None:
            found.append(f"{module} (the root package) imports {target} (line {line})")
        elif imported is None or imported == importer:
            continue
        elif importer not in layers or imported not in layers:
            continue          # reported by the placement check
        elif layers[imported] > layers[importer]:
            found.append(f"{module} imports {target} (line {line}): {importer} (layer "
                         f"{layers[importer]}) is below {imported} (layer {layers[imported]})")
    return found


def package_graph(edges, root=ROOT):
    """C{{package: set of packages it imports}}, self-imports and the root left out."""
    graph = {}
    for module, _, target in edges:
        importer, imported = package_of(module, root), package_of(target, root)
        if importer is not None:
            graph.setdefault(importer, set())
            if imported is not None and imported != importer:
                graph[importer].add(imported)
    return graph


def find_cycle(graph):
    """A list of packages C{[a, b, ..., a]} forming a cycle, or None."""
    done, path, on_path = set(), [], set()

    def visit(package):
        path.append(package)
        on_path.add(package)
        for following in sorted(graph.get(package, ())):
            if following in on_path:
                return path[path.index(following):] + [following]
            if following not in done:
                cycle = visit(following)
                if cycle:
                    return cycle
        on_path.discard(path.pop())
        done.add(package)
        return None

    for package in sorted(graph):
        if package not in done:
            cycle = visit(package)
            if cycle:
                return cycle
    return None


class LayerTests(SynchronousTestCase):
    """The imports of the orchd/ tree against L{LAYERS}."""

    directory = os.path.dirname(os.path.abspath(orchd.__file__))
    _edges = None

    @property
    def edges(self):
        """The tree's imports, read once for all the tests of the class."""
        if LayerTests._edges is None:
            LayerTests._edges = read_imports(self.directory)
        return LayerTests._edges

    def test_imports_follow_the_layers(self):
        """No module imports a package of a layer above its own."""
        self.assertTrue(self.edges, "no imports read under " + self.directory)
        self.assertEqual(violations(self.edges, layer_of()), [])

    def test_no_package_cycle(self):
        """The package import graph has no cycle, within a layer included."""
        self.assertIsNone(find_cycle(package_graph(self.edges)))

    def test_every_package_is_placed(self):
        """Each package (and top-level module) under orchd/ is in exactly one layer."""
        present = {package_of(name) for name, _, _ in modules(self.directory)} - {None}
        listed = [package for layer in LAYERS for package in layer]
        self.assertEqual(sorted(listed), sorted(set(listed)), "a package is listed twice")
        self.assertEqual(sorted(present - set(listed)), [], "packages not in LAYERS")
        self.assertEqual(sorted(set(listed) - present), [], "LAYERS names missing packages")


class CheckerTests(SynchronousTestCase):
    """The checker itself, on sources written here: it sees what it must."""

    PACKAGES = {"api", "auth", "registry", "tls"}

    def test_function_level_and_relative_imports_are_read(self):
        """Imports inside functions count, and relative ones resolve against the package."""
        source = ("import orchd.api.meta\n"
                  "from . import cache\n"
                  "from ..registry import options\n"
                  "def later():\n"
                  "    from orchd.registry.generic import Store\n"
                  "    import os\n")
        self.assertEqual(imports(source, "orchd.auth.csr", False, self.PACKAGES),
                         [(1, "orchd.api.meta"), (2, "orchd.auth"), (3, "orchd.registry"),
                          (5, "orchd.registry.generic")])
        self.assertEqual(imports("from .x import y\n", "orchd.auth", True, self.PACKAGES),
                         [(1, "orchd.auth.x")])

    def test_from_root_imports(self):
        """C{from orchd import auth} is an import of the package; C{__version__} of the root."""
        self.assertEqual(imports("from orchd import auth, __version__\n", "orchd.tls.x", False,
                                 self.PACKAGES), [(1, "orchd.auth"), (1, "orchd")])

    def test_upward_import_is_named(self):
        """An import of a higher layer is reported with module, target and line."""
        layers = {"tls": 0, "api": 1, "auth": 2, "registry": 3}
        edges = [("orchd.auth.csr", 7, "orchd.registry.options"),
                 ("orchd.auth.csr", 8, "orchd.api.meta"),
                 ("orchd.auth.csr", 9, "orchd.auth.user"),
                 ("orchd.tls.certs", 3, "orchd"),
                 ("orchd", 2, "orchd.api")]
        self.assertEqual(violations(edges, layers), [
            "orchd.auth.csr imports orchd.registry.options (line 7): auth (layer 2) is below "
            "registry (layer 3)",
            "orchd (the root package) imports orchd.api (line 2)"])

    def test_cycle_within_a_layer_is_found(self):
        """Two packages of one layer importing each other form a cycle."""
        edges = [("orchd.auth.a", 1, "orchd.admission.b"), ("orchd.admission.b", 1, "orchd.auth"),
                 ("orchd.auth.a", 2, "orchd.api.meta")]
        self.assertEqual(find_cycle(package_graph(edges)), ["admission", "auth", "admission"])
        self.assertIsNone(find_cycle(package_graph(edges[1:])))

    def test_relative_import_beyond_the_top_is_an_error(self):
        """A relative import climbing above orchd is refused rather than misread."""
        self.assertRaises(ValueError, imports, "from ... import x\n", "orchd.auth.csr", False,
                          self.PACKAGES)
