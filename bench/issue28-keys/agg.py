"""Before/after table of the alternating rounds in this folder: per backend
and workload, the median over rounds of jobq jobs/s on each side, their
ratio, the median jobq/raw on each side, and the median of the paired
(same-round) after/before ratios."""
import glob, json, statistics as st
from collections import defaultdict

def load(side):
    out = defaultdict(list)  # (backend, workload) -> [(jobq, ratio, round)]
    for path in sorted(glob.glob(f"{side}-*.json")):
        rnd = path.split("-")[1].split(".")[0]
        for b in json.load(open(path))["backends"]:
            for r in b["rows"]:
                out[(b["backend"][:8], r["workload"])].append(
                    (r["jobq_jobs_per_s"]["median"], r["ratio"], rnd))
    return out

before, after = load("before"), load("after")
print("| backend | workload | before jobq/s | after jobq/s | after/before | paired | before jobq/raw | after jobq/raw |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for key in sorted(before):
    b, a = before[key], after.get(key, [])
    if not a:
        continue
    bj, aj = st.median(x[0] for x in b), st.median(x[0] for x in a)
    pairs = [x[0] / y[0] for x in a for y in b if x[2] == y[2]]
    print(f"| {key[0]} | {key[1]} | {bj:,.0f} | {aj:,.0f} | {aj/bj:.2f} | {st.median(pairs):.2f} | "
          f"{st.median(x[1] for x in b):.2f} | {st.median(x[1] for x in a):.2f} |")
