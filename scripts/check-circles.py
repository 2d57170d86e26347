#!/usr/bin/env python3
"""Import circles between the modules of each crate, checked on the sources.

A module is one file under a crate's `src/` (its inline modules belong to it; `#[cfg(test)]` modules are left
out, and so are plain comments and strings). Module A imports module B when A's code names a path that leads
into B: `use crate::b::X`, `use super::X`, `self::b::f()`, or `crate::b::T` anywhere else (an expression, a type,
a signature, an impl), or when a doc comment of A (`///`, `//!`, `/** */`, `/*! */`) names one, as an intra-doc
link (`[`crate::b::X`]`, `[text](super::b)`, `[text]: crate::b`) or in a code span: docs that name a module tie
A to it as code does (`cargo doc -D warnings` resolves the links). A path to a name that a module re-exports
(`pub use a::X`, or `pub use a::*` for the names `a` defines or re-exports) leads to where the name comes from,
through any chain of re-exports. A module contains its submodules, so naming
them is not an import: `lib.rs` and a `mod.rs` that re-export or call their own children are never in a circle
through them. A circle is a set of two or more modules that each reach the others (a strongly connected
component of the import graph).

Prints each circle with one closed path through it, each step with the file and line that makes it, and exits 1
on a circle that is not in the allow-list (scripts/circles-allowed.txt) or on an allow-list entry that is no
longer a circle (the list only shrinks). `--self-test` checks each rule on made-up crates; `--list` prints every
circle, allowed or not, in the allow-list's form. `scripts/lint.sh` runs the self-test and the check.
"""

import re
import sys
import tempfile
import tomllib
from pathlib import Path

ALLOW_LIST = Path("scripts/circles-allowed.txt")

# ---- reading sources -------------------------------------------------------------------------------------------

CHAR_RE = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)|[^\\'\n])'")


def strip(src):
    """The source with comments, strings and char literals blanked out (newlines kept, so lines still count)."""
    return scan(src)[0]


def scan(src):
    """(code, docs): the source with comments, strings and char literals blanked out, and the text of its doc
    comments (`///`, `//!`, `/** */`, `/*! */`) with everything else blanked out; both keep every character's
    place, so offsets and lines are the same in both."""
    out, docs, i, n = [], [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            doc = src.startswith(("///", "//!"), i) and not src.startswith("////", i)
            if doc:
                docs.append((i, j))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(src[i:j]))
            doc = src.startswith(("/**", "/*!"), i) and not src.startswith(("/***", "/**/"), i)
            if doc:
                docs.append((i, j))
            i = j
        elif raw := re.match(r'b?r(#*)"', src[i:i + 260]) if c in "br" and not word_before(src, i) else None:
            end = '"' + raw.group(1)
            j = src.find(end, i + raw.end())
            j = n if j < 0 else j + len(end)
            out.append(blank(src[i:j]))
            i = j
        elif c == '"' or (c == "b" and src.startswith('b"', i) and not word_before(src, i)):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(blank(src[i:j]))
            i = j
        elif c == "'" and (m := CHAR_RE.match(src, i)):
            out.append(" " * (m.end() - i))
            i = m.end()
        else:
            out.append(c)
            i += 1
    code = "".join(out)
    doc_text = list(blank(src))
    for a, b in docs:
        doc_text[a:b] = src[a:b]
    return code, "".join(doc_text)


def word_before(src, i):
    return i > 0 and (src[i - 1].isalnum() or src[i - 1] == "_")


def blank(text):
    return re.sub(r"[^\n]", " ", text)


def matching_brace(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text)


MOD_RE = re.compile(r"\bmod\s+(\w+)\s*([;{])")
USE_RE = re.compile(r"(\bpub\s*(?:\([^)]*\))?\s*)?\buse\s+([^;]*);")
ITEM_RE = re.compile(r"\b(?:struct|enum|union|trait|fn|type|const|static|macro_rules!)\s+(\w+)")
PATH_RE = re.compile(r"(?<![\w:])(\$?crate|super|self|\w+)((?:\s*::\s*(?:super|\w+|\{))+)")


def use_paths(tree):
    """The paths of a use tree (`a::{b, c::d as e, self}`) as (segments, name it binds or None)."""
    tree = re.sub(r"\s*(::|[{},])\s*", r"\1", re.sub(r"\s+", " ", tree.strip()))
    out = []

    def walk(prefix, text):
        for part in split_top(text):
            if not part:
                continue
            if "{" in part:
                head, inner = part.split("{", 1)
                walk(prefix + [s for s in head.split("::") if s], inner[:inner.rfind("}")])
                continue
            name = None
            if " as " in part:
                part, name = part.split(" as ", 1)
            segs = prefix + [s for s in part.split("::") if s]
            if segs and segs[-1] == "self":
                segs = segs[:-1]
            out.append((segs, name if name is not None else (segs[-1] if segs and segs[-1] != "*" else None)))

    walk([], tree)
    return out


def split_top(text):
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


class Module:
    def __init__(self, path, file, children_dir):
        self.path = path  # segments from the crate root
        self.file = file
        self.children_dir = children_dir
        self.children = {}  # name -> Module
        self.refs = []  # (segments as written, line, text, inline depth, is a pub use, name it binds)
        self.items = set()  # names its own items define (outside inline modules)
        self.globs = []  # (segments, inline depth) of its `pub use path::*`


def read_module(path, file, children_dir, modules):
    """Reads `file` as the module at `path`, its declared children recursively, into `modules`."""
    mod = Module(tuple(path), file, children_dir)
    modules[mod.path] = mod
    text, docs = scan(file.read_text(encoding="utf-8"))
    skip, inline = [], []  # (start, end) of test modules; of other inline modules
    for m in MOD_RE.finditer(text):
        if m.group(2) == "{":
            end = matching_brace(text, m.end() - 1)
            attrs = text[max(text.rfind(";", 0, m.start()), text.rfind("}", 0, m.start()), 0):m.start()]
            (skip if re.search(r"cfg\s*\(\s*(?:all\s*\(\s*)?test\b", attrs) or m.group(1) == "tests"
             else inline).append((m.start(), end))
    for m in MOD_RE.finditer(text):
        if m.group(2) != ";" or any(a <= m.start() <= b for a, b in skip + inline):
            continue
        name = m.group(1)
        for cand, grand in ((children_dir / f"{name}.rs", children_dir / name),
                            (children_dir / name / "mod.rs", children_dir / name)):
            if cand.exists():
                mod.children[name] = read_module(path + [name], cand, grand, modules)
                break
    uses = []
    for m in USE_RE.finditer(text):
        if any(a <= m.start() <= b for a, b in skip):
            continue
        line = text.count("\n", 0, m.start()) + 1
        depth = sum(a <= m.start() <= b for a, b in inline)
        for segs, name in use_paths(m.group(2)):
            mod.refs.append((segs, line, "use " + "::".join(segs), depth, bool(m.group(1)), name))
            if m.group(1) and segs[-1:] == ["*"]:
                mod.globs.append((segs[:-1], depth))
        uses.append((m.start(), m.end()))
    # Paths in code (expressions, types, signatures, attributes), then paths in doc comments: an intra-doc link
    # (`[`crate::b::X`]`, `[text](super::b)`) or a code span naming a path documents the module in terms of
    # another, and `cargo doc -D warnings` breaks when the other one moves, so it counts as an import too.
    for source, label in ((text, ""), (docs, "doc: ")):
        for m in PATH_RE.finditer(source):
            if any(a <= m.start() <= b for a, b in skip + uses):
                continue
            segs = [m.group(1).lstrip("$")] + [s for s in re.split(r"\s*::\s*", m.group(2)) if s and s != "{"]
            line = text.count("\n", 0, m.start()) + 1
            depth = sum(a <= m.start() <= b for a, b in inline)
            mod.refs.append((segs, line, label + "::".join(segs), depth, False, None))
    outside = "".join(" " if any(a <= k <= b for a, b in skip + inline) else ch for k, ch in enumerate(text))
    mod.items = set(ITEM_RE.findall(outside))
    return mod


def crate_roots(root):
    """(crate name, root file) for every library, binary and src/bin target under crates/."""
    out = []
    for manifest in sorted(root.glob("crates/*/Cargo.toml")):
        with open(manifest, "rb") as f:
            name = tomllib.load(f)["package"]["name"]
        src = manifest.parent / "src"
        for file, label in ((src / "lib.rs", name), (src / "main.rs", name)):
            if file.exists():
                out.append((label if label not in [o[0] for o in out] else f"{name} (bin)", file))
        for file in sorted((src / "bin").glob("*.rs")):
            out.append((f"{name} (bin {file.stem})", file))
    return out


# ---- the import graph ------------------------------------------------------------------------------------------

def graph(root_file):
    """modules: path -> Module; edges: from path -> {to path: (file, line, text)} (the first reference)."""
    modules = {}
    read_module([], root_file, root_file.parent, modules)
    reexports = {p: {} for p in modules}  # module -> name -> absolute segments it re-exports
    for mod in modules.values():
        for segs, _, _, depth, pub, name in mod.refs:
            if pub and name and (target := absolute(mod, segs, depth)) is not None:
                reexports[mod.path][name] = target
    # A glob re-export (`pub use a::*`) re-exports each name its source defines or re-exports in turn.
    for _ in range(8):
        for mod in modules.values():
            for segs, depth in mod.globs:
                source = absolute(mod, segs, depth)
                source = tuple(source) if source is not None else None
                if source not in modules:
                    continue
                names = {n: list(source) + [n] for n in modules[source].items} | reexports[source]
                for n, target in names.items():
                    reexports[mod.path].setdefault(n, target)
    edges = {p: {} for p in modules}
    for mod in modules.values():
        for segs, line, text, depth, _, _ in mod.refs:
            target = resolve(modules, reexports, absolute(mod, segs, depth))
            # A module contains its submodules: naming them is not an import (so lib.rs and mod.rs facades are
            # never part of a circle through their own children).
            if target is None or target[:len(mod.path)] == mod.path or target in edges[mod.path]:
                continue
            edges[mod.path][target] = (mod.file, line, text)
    return modules, edges


def absolute(mod, segs, depth):
    """`segs` as written in `mod` (inside `depth` inline modules), from the crate root; None for an outside path."""
    if not segs:
        return None
    head = segs[0]
    if head == "crate":
        return list(segs[1:])
    if head == "self":
        return list(mod.path) + list(segs[1:])
    if head == "super":
        ups = 0
        while ups < len(segs) and segs[ups] == "super":
            ups += 1
        ups -= depth
        if ups <= 0:
            return list(mod.path) + list(segs[ups + depth:])
        if ups > len(mod.path):
            return None
        return list(mod.path[:len(mod.path) - ups]) + list(segs[ups + depth:])
    if head in mod.children and depth == 0:
        return list(mod.path) + list(segs)
    return None


def resolve(modules, reexports, segs, hops=0):
    """The module a path leads into (its longest module prefix), followed through that module's re-exports."""
    if segs is None:
        return None
    best = ()
    for k in range(1, len(segs) + 1):
        if tuple(segs[:k]) in modules:
            best = tuple(segs[:k])
    rest = segs[len(best):]
    if rest and rest[0] in reexports[best] and hops < 8:
        via = list(reexports[best][rest[0]]) + list(rest[1:])
        if via != list(segs):
            return resolve(modules, reexports, via, hops + 1)
    return best


def circles(edges):
    """Strongly connected components of two or more modules (Tarjan), each sorted, in sorted order."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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
    return sorted(out)


def closed_path(edges, comp):
    """A shortest closed path from the component's first module back to it, inside the component."""
    start, inside = comp[0], set(comp)
    prev, queue = {start: None}, [start]
    for v in queue:
        for w in sorted(edges[v]):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return path[::-1] + [start]
            if w in inside and w not in prev:
                prev[w] = v
                queue.append(w)
    return [start]


def name(path):
    return "::".join(path) if path else "crate"


def key(crate, comp):
    return f"{crate}: {' '.join(name(p) for p in comp)}"


def describe(root, crate, edges, comp):
    path = closed_path(edges, comp)
    lines = [f"{crate}: {len(comp)} modules in a circle: {', '.join(name(p) for p in comp)}",
             f"  one way round: {' -> '.join(name(p) for p in path)}"]
    for a, b in zip(path, path[1:]):
        file, line, text = edges[a][b]
        lines.append(f"    {name(a)} -> {name(b)}: {file.relative_to(root)}:{line}: {text}")
    return "\n".join(lines)


def find_all(root):
    """(key, description) of every circle in every crate under root."""
    out = []
    for crate, file in crate_roots(root):
        _, edges = graph(file)
        for comp in circles(edges):
            out.append((key(crate, comp), describe(root, crate, edges, comp)))
    return out


def read_allow_list(path):
    if not path.exists():
        return []
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def check(root, allow_file):
    """Messages for every circle not allowed and every allowed circle that is gone, and the allowed count."""
    found = find_all(root)
    allowed = read_allow_list(allow_file)
    keys = {k for k, _ in found}
    problems = [f"new import circle (break it; see ARCHITECTURE.md#no-import-circles):\n{d}"
                for k, d in found if k not in allowed]
    problems += [f"{allow_file.name} lists a circle that no longer exists; remove the line: {k}"
                 for k in allowed if k not in keys]
    return problems, sum(k in allowed for k in keys)


# ---- self-test -------------------------------------------------------------------------------------------------

def write(root, files):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def self_test():
    """Each rule on made-up crates: what makes an import, what does not, and the allow-list's two failures."""
    assert use_paths("crate::{a::{self, B}, c::D as E, f::*}") == [
        (["crate", "a"], "a"), (["crate", "a", "B"], "B"), (["crate", "c", "D"], "E"), (["crate", "f", "*"], None)]
    assert strip('let s = "use crate::x;"; // crate::y\nlet c = \'{\';').count("crate") == 0
    code, docs = scan("/// [`crate::a`]\n//! crate::b\n/** crate::c */ //// crate::x\n/* crate::y */ fn f() {}\n")
    assert "fn f()" in code and "crate" not in code and len(code) == len(docs), (code, docs)
    assert docs.split() == ["///", "[`crate::a`]", "//!", "crate::b", "/**", "crate::c", "*/"], docs
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        manifest = '[package]\nname = "{}"\nversion = "0.1.0"\n'
        write(root, {
            "crates/one/Cargo.toml": manifest.format("one"),
            # lib.rs re-exports (a facade, not an import) and uses nothing itself.
            "crates/one/src/lib.rs": "pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub mod e;\npub mod f;\npub mod g;\n"
                                     "pub mod p;\npub use a::Thing;\n",
            # a -> b by a use, b -> a by an expression path: a circle.
            "crates/one/src/a.rs": "use crate::b::Other;\npub struct Thing;\n",
            "crates/one/src/b.rs": "pub struct Other;\nfn f() { let _ = crate::a::Thing; }\n",
            # c names a through the facade (crate::Thing -> a), and a does not name c: no circle.
            "crates/one/src/c.rs": "use crate::Thing;\n",
            # d imports e; e names d only in a test module: no circle.
            "crates/one/src/d.rs": "use crate::e::E;\n",
            "crates/one/src/e.rs": "pub struct E;\n#[cfg(test)]\nmod tests {\n    use crate::d::*;\n}\n",
            # f imports g; g names f only in comments and strings: no circle.
            "crates/one/src/f.rs": "use crate::g::G;\n",
            "crates/one/src/g.rs": "pub struct G; // use crate::f::X;\nconst S: &str = \"crate::f::X\";\n"
                                   "/* crate::f::Y */ const C: char = '{';\n",
            # p contains p::q: p naming q (q::h()) is not an import, so q naming p (super::P) makes no circle.
            # p::r names super::Q, which p re-exports from q: that is an import of q, and q names r back.
            "crates/one/src/p/mod.rs": "mod q;\nmod r;\npub use q::Q;\npub struct P;\nfn g() { q::h(); }\n",
            "crates/one/src/p/q.rs": "use super::P;\npub struct Q;\npub fn h() { super::r::k(); }\n"
                                     "mod inner {\n    use super::h;\n}\n",
            "crates/one/src/p/r.rs": "use super::Q;\npub fn k() {}\n",
        })
        allow = root / "allowed.txt"
        found = dict(find_all(root))
        assert set(found) == {"one: a b", "one: p::q p::r"}, found
        assert "crates/one/src/b.rs:2: crate::a::Thing" in found["one: a b"], found["one: a b"]
        problems, _ = check(root, allow)
        assert len(problems) == 2 and all("new import circle" in p for p in problems), problems
        allow.write_text("# allowed\none: a b\none: p::q p::r\n", encoding="utf-8")
        assert check(root, allow) == ([], 2), check(root, allow)
        # Breaking a circle leaves its allow-list line stale: that fails too.
        write(root, {"crates/one/src/b.rs": "pub struct Other;\n"})
        problems, _ = check(root, allow)
        assert len(problems) == 1 and "no longer exists" in problems[0] and "one: a b" in problems[0], problems
        write(root, {
            "crates/two/Cargo.toml": manifest.format("two"),
            "crates/two/src/lib.rs": "pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub mod e;\npub mod m;\n"
                                     "pub mod n;\npub mod s;\npub mod t;\npub mod u;\npub use m::*;\npub use s::Chain;\n",
            # a -> b in a signature, b -> a in an impl's trait path: a circle.
            "crates/two/src/a.rs": "pub trait Tr {}\npub fn f(_b: &crate::b::B) -> Option<()> { None }\n",
            "crates/two/src/b.rs": "pub struct B;\nimpl super::a::Tr for B {}\n",
            # c -> d in a doc comment's code span, d -> c in a doc link's definition: a circle (docs count).
            "crates/two/src/c.rs": "//! Built into `crate::d::D`.\npub struct C;\n",
            "crates/two/src/d.rs": "/// Holds a [`C`].\n///\n/// [`C`]: crate::c::C\npub struct D;\n"
                                   "//// crate::e::E\n/* crate::e::E */\nconst S: &str = \"crate::e::E\";\n",
            # e imports d; d names e only in a `////` comment, a block comment and a string: e stays out.
            "crates/two/src/e.rs": "pub struct E(crate::d::D);\n",
            # n names m's M through the crate root's glob re-export; m calls n: a circle.
            "crates/two/src/m.rs": "pub struct M;\npub fn m() { crate::n::n(); }\n",
            "crates/two/src/n.rs": "pub fn n() { let _ = crate::M; }\n",
            # u names crate::Chain, re-exported from s, which re-exports it from t; t calls u: t and u, not s.
            "crates/two/src/s.rs": "pub use crate::t::Chain;\n",
            "crates/two/src/t.rs": "pub struct Chain;\npub fn t() { crate::u::u(); }\n",
            "crates/two/src/u.rs": "pub fn u() -> crate::Chain { crate::Chain }\n",
        })
        found = {k: d for k, d in find_all(root) if k.startswith("two:")}
        assert set(found) == {"two: a b", "two: c d", "two: m n", "two: t u"}, found
        assert "crates/two/src/d.rs:3: doc: crate::c::C" in found["two: c d"], found["two: c d"]
        assert "crates/two/src/c.rs:1: doc: crate::d::D" in found["two: c d"], found["two: c d"]
    print("check-circles: self-test ok", file=sys.stderr)


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        return self_test()
    root = Path(__file__).resolve().parent.parent
    if args[:1] == ["--list"]:
        for k, d in find_all(root):
            print(d if "-v" in args else k)
        return
    problems, allowed = check(root, root / ALLOW_LIST)
    for p in problems:
        print(f"check-circles: {p}", file=sys.stderr)
    if problems:
        sys.exit(f"check-circles: {len(problems)} problem(s) with import circles (see ARCHITECTURE.md)")
    print(f"check-circles: ok ({allowed} allowed circle(s) left in {ALLOW_LIST})", file=sys.stderr)


if __name__ == "__main__":
    main()
