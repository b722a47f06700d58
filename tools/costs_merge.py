#!/usr/bin/env python3
"""costs_merge.py: merge newer measured rows into a kernel cost table (traces/costs/README.md's
format, dmuon-costs-1 or -2): every row of NEW replaces the row of BASE with the same (op, algo,
m, n, k, batch) (k = 0 in a -1 table), or is added; BASE's header stays, with one '# also:' line
saying what came in. Both tables must be of one GPU and one source, and NEW's columns must be
BASE's (a -1 table's rows into a -2 table get k = 0), but for mhz (the clock a row was timed at, which
bench kernels writes): NEW's mhz column is added to BASE when BASE has none, its other rows empty.

    python3 tools/costs_merge.py BASE NEW --note TEXT --out OUT [--drop OP,ALGO]...   (OUT may be BASE)

--drop OP,ALGO removes BASE's rows of that op and algo first (rows of a kind NEW replaces by
another: the old muon_update '-' rows by its apply and prep rows). --only OP,ALGO takes only
NEW's rows of that op and algo (repeatable).

Prints how many rows were replaced and added. Nothing is written when a check fails."""
import argparse
import os
import sys
import tempfile


def read(path):
    head, cols, rows = [], None, []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip('\n')
            if line.startswith('#'):
                head.append(line)
            elif cols is None:
                cols = line.split(',')
            elif line.strip():
                v = line.split(',')
                if len(v) != len(cols):
                    sys.exit(f'{path}:{n}: expected {len(cols)} fields ({",".join(cols)}), found {len(v)}')
                rows.append(dict(zip(cols, v)))
    if cols is None:
        sys.exit(f'{path}: no column line')
    return head, cols, rows


def key(r):
    return (r['op'], r['algo'], r['m'], r['n'], r.get('k', '0'), r['batch'])


def header_value(head, name):
    for h in head:
        if h.startswith(f'# {name}:'):
            return h.split(':', 1)[1].strip()
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('base')
    ap.add_argument('new')
    ap.add_argument('--note', required=True, help="the '# also:' line: what the rows are, when and how measured")
    ap.add_argument('--out', required=True)
    ap.add_argument('--drop', action='append', default=[], help="OP,ALGO: BASE's rows of that kind removed first")
    ap.add_argument('--only', action='append', default=[], help="OP,ALGO: only NEW's rows of that kind merged")
    a = ap.parse_args()
    bh, bc, br = read(a.base)
    nh, nc, nr = read(a.new)
    for name in ('gpu', 'source'):
        if header_value(bh, name) != header_value(nh, name):
            sys.exit(f'{a.new}: # {name}: {header_value(nh, name)!r}, but {a.base} has {header_value(bh, name)!r}')
    if [c for c in nc if c not in ('k', 'mhz')] != [c for c in bc if c not in ('k', 'mhz')]:
        sys.exit(f'{a.new}: columns {",".join(nc)} differ from {a.base}\'s {",".join(bc)}')
    if 'mhz' in nc and 'mhz' not in bc:  # the clock rows were timed at: BASE's rows without it get none
        bc = bc + ['mhz']
    drop = {tuple(d.split(',', 1)) for d in a.drop}
    dropped = len(br)
    br = [r for r in br if (r['op'], r['algo']) not in drop]
    dropped -= len(br)
    if a.only:
        only = {tuple(d.split(',', 1)) for d in a.only}
        nr = [r for r in nr if (r['op'], r['algo']) in only]
    at = {key(r): i for i, r in enumerate(br)}
    replaced = added = 0
    for r in nr:
        r.setdefault('k', '0')
        if key(r) in at:
            br[at[key(r)]] = r
            replaced += 1
        else:
            at[key(r)] = len(br)
            br.append(r)
            added += 1
    head = bh + [f'# also: {a.note}']
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(a.out)) or '.', prefix='.costs_merge.')
    with os.fdopen(fd, 'w') as f:
        f.write('\n'.join(head) + '\n')
        f.write(','.join(bc) + '\n')
        for r in br:
            f.write(','.join(r.get(c, '' if c == 'mhz' else '0') for c in bc) + '\n')
    os.replace(tmp, a.out)
    print(f'{a.out}: {dropped} rows dropped, {replaced} replaced, {added} added ({len(br)} rows)')


if __name__ == '__main__':
    main()
