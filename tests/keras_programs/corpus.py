#!/usr/bin/env python3
"""The Keras-program corpus of issue 21: real, public Keras programs run on tarantella.

The programs themselves are not in this repository (public code stays out of our commits): `collect`
copies each one, at the commit programs.py pins, out of the stored snapshot of its repository
(/work/.mirror/<owner>+<name>/repo, or TNT_KERAS_CORPUS_MIRRORS) and checks its SHA-256. `run`
then makes the program's tarantella version mechanically, as a user migrating would:

  1. its import lines, and nothing else of its code, are rewritten by the rules in IMPORT_RULES
     (`import keras` -> `from tarantella import keras`, `import tensorflow as tf` ->
     `import tarantella.tensorflow as tf`, ...);
  2. the few edits programs.py lists for it, each with its reason: smaller epochs, steps and
     sample counts, and a download that is not a Keras cache file replaced by a local file;
  3. downloads through Keras (keras.datasets.*, keras.utils.get_file) find their files in Keras's
     cache folder ($KERAS_HOME, ~/.keras), where `data` has put files of Keras's formats with
     small, seeded random contents of the real shapes.

The adapted program runs in a fresh interpreter (PYTHONPATH gives the tarantella package) in its
own working folder. It passes when it runs to the end, every loss and metric that fit, evaluate,
train_on_batch and test_on_batch returned is finite (at least one training call happened), and
the figures programs.py names in its output parse and lie in their range.

  corpus.py collect OUT_DIR           the originals, checked
  corpus.py data KERAS_HOME           the synthetic cache files
  corpus.py prepare DIR                both, into DIR/originals and DIR/home (the ctest fixture)
  corpus.py run NAME --originals DIR --keras-home DIR --work DIR
  corpus.py diff NAME --originals DIR  the adapted program against the original
  corpus.py list [--expected]          the names (main corpus and custom-code group)
  corpus.py provenance                 the README's provenance table
  corpus.py table --originals DIR --keras-home DIR --work DIR [--jobs N] [--update-expected]
                                       status and first cause of each; --update-expected writes
                                       the passing ones into expected_pass.txt
"""
import argparse
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import programs  # noqa: E402
import synthetic_data  # noqa: E402

# The name the TensorFlow-compatible module of the package has (issue 21, part 1).
TF_MODULE = "tarantella.tensorflow"

# (pattern, replacement) on whole import lines; the first that matches wins.
IMPORT_RULES = [
    (r"^(\s*)import keras\s*$", r"\1from tarantella import keras"),
    (r"^(\s*)import keras as (\w+)\s*$", r"\1from tarantella import keras as \2"),
    (r"^(\s*)import keras\.([\w.]+) as (\w+)\s*$", r"\1import tarantella.keras.\2 as \3"),
    (r"^(\s*)from keras((?:\.\w+)*) import ", r"\1from tarantella.keras\2 import "),
    (r"^(\s*)import tensorflow\.keras as (\w+)\s*$", r"\1from tarantella import keras as \2"),
    (r"^(\s*)from tensorflow import keras\s*$", r"\1from tarantella import keras"),
    (r"^(\s*)from tensorflow\.keras((?:\.\w+)*) import ", r"\1from tarantella.keras\2 import "),
    (r"^(\s*)import tensorflow as (\w+)\s*$", r"\1import " + TF_MODULE + r" as \2"),
    (r"^(\s*)import tensorflow\s*$", r"\1import " + TF_MODULE + " as tensorflow"),
    (r"^(\s*)from tensorflow((?:\.\w+)*) import ", r"\1from " + TF_MODULE + r"\2 import "),
]


def mirror_dir(repo):
    root = os.environ.get("TNT_KERAS_CORPUS_MIRRORS", "/work/.mirror")
    git = os.path.join(root, repo.replace("/", "+"), "repo")
    return os.path.join(git, ".git") if os.path.isdir(os.path.join(git, ".git")) else git  # a clone with a work tree


def original_text(prog, originals):
    with open(os.path.join(originals, prog["name"] + ".py"), encoding="utf-8") as f:
        return f.read()


def notebook_to_script(raw):
    """The code cells of a notebook, in order, as one script (shell and magic lines dropped)."""
    cells = json.loads(raw)["cells"]
    out = []
    for c in cells:
        if c["cell_type"] != "code":
            continue
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        lines = [ln for ln in src.split("\n") if not ln.lstrip().startswith(("!", "%"))]
        out.append("\n".join(lines).rstrip() + "\n")
    return "\n".join(out)


def pinned_digests():
    """sha256.txt: name -> the SHA-256 of the file as stored at its commit (before notebook extraction)."""
    path = os.path.join(HERE, "sha256.txt")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return dict(ln.split()[:2][::-1] for ln in f if ln.strip() and not ln.startswith("#"))


def collect(out_dir, write_digests=False):
    os.makedirs(out_dir, exist_ok=True)
    problems = []
    pins = pinned_digests()
    digests = {}
    for prog in programs.PROGRAMS:
        src = programs.SOURCES[prog["source"]]
        git = mirror_dir(src["repo"])
        if not os.path.isdir(git):
            problems.append(f"{prog['name']}: no snapshot of {src['repo']} at {git} (fetch github:{src['repo']})")
            continue
        try:
            raw = subprocess.run(["git", "--git-dir", git, "show", f"{src['commit']}:{prog['path']}"],
                                 check=True, capture_output=True).stdout
        except subprocess.CalledProcessError as e:
            problems.append(f"{prog['name']}: {src['repo']}@{src['commit']}:{prog['path']}: "
                            f"{e.stderr.decode().strip()}")
            continue
        digest = hashlib.sha256(raw).hexdigest()
        digests[prog["name"]] = digest
        if not write_digests and pins.get(prog["name"]) not in (None, digest):
            problems.append(f"{prog['name']}: SHA-256 {digest}, sha256.txt pins {pins[prog['name']]}")
            continue
        text = raw.decode("utf-8")
        if prog["path"].endswith(".ipynb"):
            text = notebook_to_script(text)
        with open(os.path.join(out_dir, prog["name"] + ".py"), "w", encoding="utf-8") as f:
            f.write(text)
    if write_digests:
        with open(os.path.join(HERE, "sha256.txt"), "w") as f:
            f.write("# SHA-256 of each program's file at its pinned commit (corpus.py collect checks them)\n")
            f.writelines(f"{d}  {n}\n" for n, d in digests.items())
    for p in problems:
        print("collect:", p, file=sys.stderr)
    print(f"collect: {len(programs.PROGRAMS) - len(problems)} of {len(programs.PROGRAMS)} programs in {out_dir}")
    return 1 if problems else 0


def rewrite_imports(text):
    out = []
    for line in text.split("\n"):
        for pat, rep in IMPORT_RULES:
            new, n = re.subn(pat, rep, line)
            if n:
                line = new
                break
        out.append(line)
    return "\n".join(out)


def adapt(prog, text):
    """The program as run: imports rewritten, then the listed edits (each must apply exactly)."""
    text = rewrite_imports(text)
    for edit in prog.get("edits", []):
        old, new = edit[0], edit[1]
        count = text.count(old)
        want = edit[3] if len(edit) > 3 else 1
        if count != want:
            raise ValueError(f"{prog['name']}: edit {old!r} matches {count} times, programs.py expects {want}")
        text = text.replace(old, new)
    return text


# The code the runner puts before the program: records what fit/evaluate/... return, so that the
# parent can check it is finite. It changes nothing the program sees.
RECORDER = r'''
import atexit as _tnt_atexit, json as _tnt_json, math as _tnt_math, sys as _tnt_sys
_tnt_calls = {"train": 0, "eval": 0, "values": [], "bad": [], "histories": []}
def _tnt_numbers(v):
    try:
        import numpy as _np
        if isinstance(v, _np.ndarray):
            return [float(x) for x in v.ravel()]
    except Exception:
        pass
    if isinstance(v, dict):
        return [x for k in v for x in _tnt_numbers(v[k])]
    if isinstance(v, (list, tuple)):
        return [x for e in v for x in _tnt_numbers(e)]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return [float(v)]
    try:
        return [float(v)]
    except Exception:
        return []
def _tnt_record(kind, what, result):
    _tnt_calls[kind] += 1
    h = getattr(result, "history", None)
    if isinstance(h, dict):
        try:
            _tnt_calls["histories"].append({k: [float(x) for x in v] for k, v in h.items()})
        except Exception:
            pass
    vals = _tnt_numbers(getattr(result, "history", result))
    _tnt_calls["values"].extend(vals[:50])
    if any(not _tnt_math.isfinite(x) for x in vals):
        _tnt_calls["bad"].append(what)
def _tnt_wrap(cls, name, kind):
    fn = cls.__dict__.get(name)
    if fn is None or getattr(fn, "_tnt_recorded", False):
        return
    def wrapped(self, *a, **k):
        r = fn(self, *a, **k)
        _tnt_record(kind, f"{cls.__name__}.{name}", r)
        return r
    wrapped._tnt_recorded = True
    wrapped.__wrapped__ = fn
    wrapped.__name__ = name
    setattr(cls, name, wrapped)
def _tnt_install():
    import tarantella, tarantella.keras as k
    seen = set()
    for root in (k.Model, getattr(k, "Sequential", None), getattr(tarantella, "Model", None)):
        for cls in (root.__mro__ if root is not None else ()):
            if cls in seen or cls is object:
                continue
            seen.add(cls)
            for name in ("fit", "fit_generator", "train_on_batch"):
                _tnt_wrap(cls, name, "train")
            for name in ("evaluate", "evaluate_generator", "test_on_batch"):
                _tnt_wrap(cls, name, "eval")
def _tnt_dump():
    with open(_TNT_SUMMARY, "w") as f:
        _tnt_json.dump(_tnt_calls, f)
_tnt_install()
_tnt_atexit.register(_tnt_dump)
'''


def exec_program(adapted_path, summary_path):
    """In the child: install the recorder, then run the program as __main__."""
    import runpy
    g = {"_TNT_SUMMARY": summary_path}
    exec(compile(RECORDER, "<corpus recorder>", "exec"), g)
    sys.argv = [adapted_path]
    sys.path.insert(0, os.path.dirname(adapted_path))
    runpy.run_path(adapted_path, run_name="__main__")


def first_cause(output):
    """The line that says why a run failed: the exception line of the last traceback."""
    lines = [ln for ln in output.strip().split("\n") if ln.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if re.match(r"^[\w.]+(Error|Exception|Exit|Interrupt|Warning)\b", lines[i]) or \
           re.match(r"^[\w.]+: ", lines[i]) and i > 0 and lines[i - 1].startswith(" "):
            return lines[i][:300]
    return (lines[-1] if lines else "(no output)")[:300]


def check_first_epoch(prog, calls):
    """"first_epoch_max": {log key: bound}: the first fit's first-epoch value must be at most the bound
    (a loss that Keras's formula bounds, e.g. cross-entropy near ln(classes) for a fresh model)."""
    problems = []
    for key, bound in prog.get("first_epoch_max", {}).items():
        hist = next((h for h in calls.get("histories", []) if key in h and h[key]), None)
        if hist is None:
            problems.append(f"no fit logged {key!r}")
        elif hist[key][0] > bound:
            problems.append(f"first-epoch {key} = {hist[key][0]:.4g}, above {bound} (Keras's formula bounds it)")
    return problems


def check_figures(prog, output):
    problems = []
    for label, kind in prog.get("prints", []):
        m = re.findall(re.escape(label) + r"\s*:?\s*\[?\s*([-+0-9.eEnaif]+)", output)
        if not m:
            problems.append(f"the program did not print {label!r}")
            continue
        for s in m:
            try:
                v = float(s)
            except ValueError:
                problems.append(f"{label!r} printed {s!r}, not a number")
                continue
            if v != v or v in (float("inf"), float("-inf")):
                problems.append(f"{label!r} printed {s} (not finite)")
            elif kind == "prob" and not 0.0 <= v <= 1.0:
                problems.append(f"{label!r} printed {v}, outside [0, 1]")
    return problems


def run(name, originals, keras_home, work, timeout=300, quiet=False):
    """Runs one program; returns (ok, cause, seconds)."""
    prog = programs.BY_NAME[name]
    path = os.path.join(originals, name + ".py")
    if not os.path.exists(path):
        return False, f"original absent: {path} (run corpus.py collect)", 0.0
    try:
        adapted = adapt(prog, original_text(prog, originals))
    except ValueError as e:
        return False, f"adaptation: {e}", 0.0
    wdir = os.path.join(work, name)
    # a fresh folder each run: what a run saves (a model a script loads when present) is not the next one's
    shutil.rmtree(wdir, ignore_errors=True)
    os.makedirs(wdir)
    for rel, kind in prog.get("files", {}).items():  # local data files the program reads
        synthetic_data.write_local(kind, os.path.join(wdir, rel))
    apath = os.path.join(wdir, name + "_tnt.py")
    with open(apath, "w", encoding="utf-8") as f:
        f.write(adapted)
    summary = os.path.join(wdir, "summary.json")
    if os.path.exists(summary):
        os.remove(summary)
    env = dict(os.environ)
    env.update({"KERAS_HOME": os.path.join(keras_home, ".keras"), "HOME": keras_home, "MPLBACKEND": "Agg",
                "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"})
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [sys.executable, os.path.abspath(__file__), "exec", apath, summary]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=wdir, env=env, capture_output=True, text=True, timeout=timeout)
        output, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return False, f"timed out after {timeout} s", time.time() - t0
    secs = time.time() - t0
    with open(os.path.join(wdir, "output.txt"), "w") as f:
        f.write(output)
    if not quiet:
        sys.stdout.write(output[-6000:])
    if rc != 0:
        return False, first_cause(output), secs
    try:
        with open(summary) as f:
            calls = json.load(f)
    except (OSError, ValueError):
        return False, "the program ended without the recorder's summary", secs
    if calls["train"] == 0 and prog.get("trains", True):
        return False, "no training call (fit/train_on_batch) happened", secs
    if calls["bad"]:
        return False, f"not finite: {calls['bad'][0]} returned NaN or inf", secs
    problems = check_first_epoch(prog, calls) + check_figures(prog, output)
    if problems:
        return False, problems[0], secs
    return True, "", secs


def show_diff(name, originals):
    prog = programs.BY_NAME[name]
    text = original_text(prog, originals)
    new = adapt(prog, text)
    sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                               f"{name}.py (original)", f"{name}_tnt.py (run)"))


def expected_pass():
    with open(os.path.join(HERE, "expected_pass.txt")) as f:
        return [ln.split("#")[0].strip() for ln in f if ln.split("#")[0].strip()]


def write_expected(passing):
    """expected_pass.txt from a table run: the programs that ran to the end, in corpus order."""
    path = os.path.join(HERE, "expected_pass.txt")
    with open(path) as f:
        header = [ln for ln in f if ln.startswith("#")]
    with open(path, "w") as f:
        f.writelines(header)
        f.writelines(f"{n}\n" for n in passing)


def table(originals, keras_home, work, jobs, names=None, update_expected=False):
    from concurrent.futures import ThreadPoolExecutor
    names = names or [p["name"] for p in programs.PROGRAMS]
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        results = list(ex.map(lambda n: (n, *run(n, originals, keras_home, work, quiet=True)), names))
    npass = {"main": 0, "custom_code": 0, "heldout": 0}
    total = {"main": 0, "custom_code": 0, "heldout": 0}
    print("| program | group | status | seconds | first cause of failure |")
    print("|---|---|---|---|---|")
    for n, ok, cause, secs in results:
        g = programs.BY_NAME[n]["group"]
        total[g] += 1
        npass[g] += ok
        print(f"| {n} | {g} | {'pass' if ok else 'FAIL'} | {secs:.1f} | {cause.replace('|', '/')} |")
    for g in total:
        if total[g]:
            print(f"\n{g}: {npass[g]} of {total[g]} run to the end")
    if update_expected:
        write_expected([n for n, ok, _, _ in results if ok])
    return 0


def provenance():
    """The README's table: each program, where it comes from, its licence and what it exercises."""
    print("| program | group | repository @ commit | path | licence | what it exercises | edits |")
    print("|---|---|---|---|---|---|---|")
    for p in programs.PROGRAMS:
        src = programs.SOURCES[p["source"]]
        print(f"| {p['name']} | {p['group']} | {src['repo']} @ {src['commit'][:10]} | {p['path']} | "
              f"{src['licence']} | {p['category']} | {len(p.get('edits', []))} |")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["collect", "data", "prepare", "run", "diff", "list", "table", "exec", "provenance",
                                        "missing"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--originals")
    ap.add_argument("--keras-home")
    ap.add_argument("--work")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--expected", action="store_true")
    ap.add_argument("--write-digests", action="store_true")
    ap.add_argument("--update-expected", action="store_true",
                    help="table: write the programs that ran to the end into expected_pass.txt")
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    if a.cmd == "exec":
        exec_program(*a.args)
        return 0
    if a.cmd == "collect":
        return collect(a.args[0], write_digests="--write-digests" in sys.argv)
    if a.cmd == "provenance":
        return provenance()
    if a.cmd == "prepare":  # the ctest fixture: both, into one folder (the data once per synthetic_data.py)
        home = os.path.join(a.args[0], "home")
        with open(synthetic_data.__file__, "rb") as f:
            stamp = hashlib.sha256(f.read()).hexdigest()
        stamp_path = os.path.join(home, ".made_by")
        if not os.path.exists(stamp_path) or open(stamp_path).read() != stamp:
            synthetic_data.write_keras_home(home)
            with open(stamp_path, "w") as f:
                f.write(stamp)
        return collect(os.path.join(a.args[0], "originals"))
    if a.cmd == "data":
        synthetic_data.write_keras_home(a.args[0])
        return 0
    if a.cmd == "missing":  # the repositories whose stored snapshots are not on this machine
        print(";".join(sorted({s["repo"] for s in programs.SOURCES.values() if not os.path.isdir(mirror_dir(s["repo"]))})))
        return 0
    if a.cmd == "list":
        names = expected_pass() if a.expected else [p["name"] for p in programs.PROGRAMS]
        print(";".join(names))
        return 0
    if a.cmd == "diff":
        show_diff(a.args[0], a.originals)
        return 0
    if a.cmd == "table":
        return table(a.originals, a.keras_home, a.work, a.jobs, a.args or None, a.update_expected)
    ok, cause, secs = run(a.args[0], a.originals, a.keras_home, a.work, a.timeout)
    print(f"\n{a.args[0]}: {'pass' if ok else 'FAIL: ' + cause} ({secs:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
