"""check_trace.py TRACE RANKS BUCKETS: the merged timeline of a run is valid Chrome trace-event
JSON (the JSON object format of the Trace Event Format: traceEvents with complete "X" and
metadata "M" events) and holds, for every rank and every training step, each layer's forward and
backward and each gradient bucket's reduction inside the step. Exit 0 when it does."""
import json
import sys
from collections import defaultdict

path, ranks, buckets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
problems = []
with open(path) as f:
    doc = json.load(f)  # valid JSON, or this raises
events = doc["traceEvents"] if isinstance(doc, dict) else None
if not isinstance(events, list) or not events:
    sys.exit(f"{path}: no traceEvents list")
if doc.get("displayTimeUnit") not in (None, "ms", "ns"):
    problems.append(f"displayTimeUnit {doc.get('displayTimeUnit')!r}")
# the schema: every event an object with a string name and a phase; X: numeric ts and dur >= 0,
# integer pid and tid, a string cat; M: process_name / thread_name with args.name
for e in events:
    if not isinstance(e, dict) or not isinstance(e.get("name"), str) or e.get("ph") not in ("X", "M"):
        problems.append(f"not a complete or metadata event: {e}")
        continue
    if not isinstance(e.get("pid"), int):
        problems.append(f"pid not an integer: {e}")
    if e["ph"] == "M":
        if e["name"] not in ("process_name", "thread_name") or not isinstance(e.get("args", {}).get("name"), str):
            problems.append(f"bad metadata event: {e}")
        continue
    if not all(isinstance(e.get(k), (int, float)) for k in ("ts", "dur")) or e["dur"] < 0:
        problems.append(f"bad ts/dur: {e}")
    if not isinstance(e.get("tid"), int) or not isinstance(e.get("cat"), str):
        problems.append(f"bad tid/cat: {e}")

x = [e for e in events if e.get("ph") == "X"]
pids = sorted({e["pid"] for e in x})
if pids != list(range(ranks)):
    problems.append(f"ranks in the trace {pids}, expected 0..{ranks - 1}")
names = {e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
if names != {f"rank {r}" for r in range(ranks)}:
    problems.append(f"process names {sorted(names)}")

layers = sorted({e["name"] for e in x if e["cat"] == "forward"})
if len(layers) < 2:
    problems.append(f"layers seen in forward: {layers}")
checked = 0
for r in range(ranks):
    mine = [e for e in x if e["pid"] == r]
    steps = [e for e in mine if e["cat"] == "step"]
    if not steps:
        problems.append(f"rank {r}: no step events")
    for s in steps:
        t0, t1 = s["ts"], s["ts"] + s["dur"]
        inside = [e for e in mine if e is not s and e["ts"] >= t0 - 1 and e["ts"] + e["dur"] <= t1 + 1]
        got = defaultdict(set)
        for e in inside:
            got[e["cat"]].add(e["name"])
        for cat in ("forward", "backward"):
            if got[cat] != set(layers):
                problems.append(f"rank {r} {s['name']}: {cat} of {sorted(got[cat])}, expected {layers}")
        want = {f"bucket {b}" for b in range(buckets)}
        if ranks > 1 and got["reduction"] != want:
            problems.append(f"rank {r} {s['name']}: reductions {sorted(got['reduction'])}, expected {sorted(want)}")
        if ranks > 1 and not got["exposed"]:
            problems.append(f"rank {r} {s['name']}: no reduction wait")
        if not got["optimizer"]:
            problems.append(f"rank {r} {s['name']}: no optimizer")
        checked += 1
if problems:
    print("\n".join(problems[:20]))
    sys.exit(1)
print(f"{path}: {len(events)} events, {ranks} ranks, {checked} steps checked, layers {layers}, {buckets} buckets a step")
