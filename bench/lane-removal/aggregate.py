# Medians per side and workload over every run of every round (run.sh's output dir).
import glob, json, os, statistics as st, sys
out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
for side in ['before', 'after']:
    agg = {}
    for f in sorted(glob.glob(f'{out}/{side}-*.json')):
        for r in json.load(open(f))['backends'][0]['rows']:
            a = agg.setdefault(r['workload'], {'j': [], 'raw': []})
            a['j'] += r['jobq_jobs_per_s']['runs']
            a['raw'] += r['raw_jobs_per_s']['runs']
    for w, v in agg.items():
        print(f"{side:7} {w:24} n={len(v['j']):2} jobq {st.median(v['j']):7.0f} jobs/s"
              f" ({min(v['j']):.0f}-{max(v['j']):.0f})  raw {st.median(v['raw']):6.0f}")
