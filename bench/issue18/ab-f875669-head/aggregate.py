# Medians per backend, side and workload over every run of every round.
import json, glob, statistics as st, os, sys
here = os.path.dirname(os.path.abspath(__file__))
for backend in ['mysql', 'postgres', 'sqlite']:
    for side in ['before-f875669', 'after-head']:
        agg = {}
        for f in sorted(glob.glob(f'{here}/{backend}-{side}-r*.json')):
            d = json.load(open(f))
            for r in d['backends'][0]['rows']:
                w = r['workload']
                a = agg.setdefault(w, {'j': [], 'ratio': []})
                a['j'] += r['jobq_jobs_per_s']['runs']
                a['ratio'] += [j / x for x, j in zip(r['raw_jobs_per_s']['runs'], r['jobq_jobs_per_s']['runs'])]
        for w, v in agg.items():
            print(f"{backend:8} {side:15} {w:24} n={len(v['j']):2} jobq {st.median(v['j']):7.0f} jobs/s  jobq/raw {st.median(v['ratio']):.2f}")
