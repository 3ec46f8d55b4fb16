#!/usr/bin/env python3
"""Aggregates a round robin of bench binaries (bench/issue30/rr.sh): per
binary and row, the median of the runs' jobq jobs/s and of jobq/raw, over
every round, and each against the first binary named (paired by round)."""
import json, os, re, statistics, sys

out = sys.argv[1]
order = sys.argv[2:]
data = {}  # (bin, backend, workload) -> {round: (jobq, raw)}
for f in sorted(os.listdir(out)):
    m = re.match(r"(.+)-(mysql|postgres|sqlite)-(\d+)\.json$", f)
    if not m:
        continue
    name, backend, rnd = m.group(1), m.group(2), int(m.group(3))
    doc = json.load(open(os.path.join(out, f)))
    for b in doc["backends"]:
        for row in b["rows"]:
            key = (name, backend, row["workload"])
            data.setdefault(key, {})[rnd] = (row["jobq_jobs_per_s"]["median"], row["raw_jobs_per_s"]["median"])
names = order or sorted({k[0] for k in data})
rows = sorted({(k[1], k[2]) for k in data})
base = names[0]
print(f"{'backend':8} {'workload':24} {'binary':16} {'n':>2} {'jobq':>8} {'jobq/raw':>8} {'÷ '+base+' (paired)':>24}")
for backend, workload in rows:
    for name in names:
        runs = data.get((name, backend, workload), {})
        if not runs:
            continue
        jobq = statistics.median(v[0] for v in runs.values())
        ratio = statistics.median(v[0] / v[1] for v in runs.values())
        ref = data.get((base, backend, workload), {})
        paired = [ (v[0] / v[1]) / (ref[r][0] / ref[r][1]) for r, v in runs.items() if r in ref]
        rel = statistics.median(paired) if paired else float("nan")
        print(f"{backend:8} {workload:24} {name:16} {len(runs):>2} {jobq:>8.0f} {ratio:>8.2f} {rel:>24.3f}")
