#!/usr/bin/env python3
"""check_layering.py: the include rules of ARCHITECTURE.md, read from the code itself.

The folders of src/ form floors; a file may include headers of its own folder and of folders on
lower floors only, which also rules out circles between folders. Programs (tools/, examples/), the
model zoo (zoo/) and the Python extension (python/src/) use the public API only:
include/tarantella.h, zoo headers and their own helper files (tools/launcher/, python/src/pytnt.h).

Usage: check_layering.py [REPO]   (exit 0: clean; 1: the offending includes are listed)
"""
import os
import re
import sys

# Bottom to top. Folders on one floor may not include each other.
FLOORS = [
    ["core"],
    ["kernels", "gpu"],
    ["comm", "ops"],
    ["objectives", "optimizers", "data"],
    ["layers"],
    ["model"],
    ["training"],
    ["io"],
    ["callbacks"],
]
FLOOR_OF = {folder: i for i, floor in enumerate(FLOORS) for folder in floor}
PUBLIC_ONLY = ["tools", "examples", "zoo", "python"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return INCLUDE.findall(f.read())


def sources(root):
    for dirpath, _, names in os.walk(root):
        for n in sorted(names):
            if n.endswith((".c", ".h")):
                yield os.path.join(dirpath, n)


def check_src(repo):
    problems = []
    src = os.path.join(repo, "src")
    for folder in sorted(os.listdir(src)):
        if not os.path.isdir(os.path.join(src, folder)):
            continue
        if folder not in FLOOR_OF:
            problems.append(f"src/{folder}/: a folder with no floor in scripts/check_layering.py")
            continue
        for path in sources(os.path.join(src, folder)):
            rel = os.path.relpath(path, repo)
            for inc in includes(path):
                target = inc.split("/")[0] if "/" in inc else None
                if target is None:  # "tarantella.h" or a bare name of the same folder
                    continue
                if target not in FLOOR_OF:
                    problems.append(f"{rel}: includes \"{inc}\", not a src/ folder")
                elif target != folder and FLOOR_OF[target] >= FLOOR_OF[folder]:
                    where = "the same floor" if FLOOR_OF[target] == FLOOR_OF[folder] else "a higher floor"
                    problems.append(f"{rel}: includes \"{inc}\" from {where} "
                                    f"({folder} is on floor {FLOOR_OF[folder]}, {target} on {FLOOR_OF[target]})")
    return problems


def check_public_only(repo):
    problems = []
    zoo_headers = set(os.listdir(os.path.join(repo, "zoo"))) if os.path.isdir(os.path.join(repo, "zoo")) else set()
    for top in PUBLIC_ONLY:
        root = os.path.join(repo, top)
        if not os.path.isdir(root):
            continue
        for path in sources(root):
            for inc in includes(path):
                # a program's own helper files (tools/launcher/) are no library internals
                own = os.path.isfile(os.path.join(os.path.dirname(path), inc))
                if inc != "tarantella.h" and inc not in zoo_headers and not own:
                    problems.append(f"{os.path.relpath(path, repo)}: includes \"{inc}\"; "
                                    f"{top}/ uses the public API only")
    return problems


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check_src(repo) + check_public_only(repo)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) break the layering (see ARCHITECTURE.md)")
        return 1
    print("layering: clean (" + " < ".join("/".join(f) for f in FLOORS) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
