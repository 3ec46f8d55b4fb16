# Medians per backend, side and workload over every run of every round
# (run.sh's output dir), and after/before of jobq and of the raw baseline.
import glob, json, os, statistics as st, sys
out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
agg = {}
for f in sorted(glob.glob(f'{out}/*-*-*.json')):
    side, backend = os.path.basename(f).split('-')[:2]
    for r in json.load(open(f))['backends'][0]['rows']:
        a = agg.setdefault((backend, r['workload']), {}).setdefault(side, {'j': [], 'raw': []})
        a['j'] += r['jobq_jobs_per_s']['runs']
        a['raw'] += r['raw_jobs_per_s']['runs']
print(f"{'backend':9} {'workload':32} {'n':>3} {'before jobq':>11} {'after jobq':>10} {'after/before':>12} {'raw b/a':>15} {'jobq/raw after':>14}")
for (backend, w), sides in sorted(agg.items()):
    b, a = sides.get('before'), sides.get('after')
    if not b or not a:
        continue
    bj, aj = st.median(b['j']), st.median(a['j'])
    br, ar = st.median(b['raw']), st.median(a['raw'])
    print(f"{backend:9} {w:32} {len(a['j']):3} {bj:11.0f} {aj:10.0f} {aj/bj:12.3f} {br:7.0f}/{ar:<7.0f} {aj/ar:14.2f}")

# Paired by round: jobq/raw of each side in the same round, after over
# before — the machine's drift between rounds cancels out.
print()
print(f"{'backend':9} {'workload':32} {'rounds':>6} {'(jobq/raw) after ÷ before, per round':>40}")
rounds = {}
for f in sorted(glob.glob(f'{out}/*-*-*.json')):
    side, backend, r = os.path.basename(f)[:-5].split('-')[:3]
    for row in json.load(open(f))['backends'][0]['rows']:
        ratio = st.median(row['jobq_jobs_per_s']['runs']) / st.median(row['raw_jobs_per_s']['runs'])
        rounds.setdefault((backend, row['workload']), {}).setdefault(r, {})[side] = ratio
for (backend, w), by_round in sorted(rounds.items()):
    paired = [v['after'] / v['before'] for v in by_round.values() if 'after' in v and 'before' in v]
    if paired:
        print(f"{backend:9} {w:32} {len(paired):6} median {st.median(paired):.3f}  ({', '.join(f'{p:.2f}' for p in paired)})")
