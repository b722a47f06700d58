#!/usr/bin/env python3
"""fwd_layers.py VALIDATE_DIR [MODEL...]: each forward layer's measured time on rank 0 in the dmuon,
adamw and muon-ddp cases of a stored one-GPU validation (its real.csv traces), and the ratios
dmuon/adamw and muon-ddp/adamw, layer by layer in the order they ran: does the forward right after
the NS phase run slower throughout, or recover?"""
import csv, sys

def fwd(case):
    rows = csv.DictReader(l for l in open(case + '/real.csv') if not l.startswith('#'))
    f = [(int(r['layer']), float(r['ts_us']), float(r['dur_us'])) for r in rows
         if r['kind'] == 'forward' and r['rank'] == '0']
    return sorted(f, key=lambda x: x[1])

d0 = sys.argv[1]
models = sys.argv[2:] or ['llama-3.2-3b', 'qwen2.5-1.5b']
for m in models:
    for t in ['1024tok', '4096tok']:
        c = lambda s: fwd(f'{d0}/{m}.{s}.interleave.1gpu.{t}')
        d, a, u = c('dmuon'), c('adamw'), c('muon-ddp')
        print(f'{m} {t}: {len(d)} forward ops (layer, dmuon us, adamw us, muon-ddp us, dmuon/adamw, muon-ddp/adamw, '
              f'dmuon start after its first forward ms)')
        for i in range(len(d)):
            print('  L%2d %9.1f %9.1f %9.1f  %.3f %.3f  %7.2f' % (d[i][0], d[i][2], a[i][2], u[i][2], d[i][2] / a[i][2],
                                                             u[i][2] / a[i][2], (d[i][1] - d[0][1]) / 1e3))
        print('  sum %.1f %.1f %.1f  %.3f %.3f' % (sum(x[2] for x in d), sum(x[2] for x in a), sum(x[2] for x in u),
                                                 sum(x[2] for x in d) / sum(x[2] for x in a),
                                                 sum(x[2] for x in u) / sum(x[2] for x in a)))
