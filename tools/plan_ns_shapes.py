#!/usr/bin/env python3
"""plan_ns_shapes.py: the NS shapes a set of step programs runs, as `dmuon bench kernels --shapes`
input: one list per NS algorithm and orientation, lines 'ROWS COLS B1,B2,..', the batches every
program runs that shape at: wide (rows <= cols, as the bench and the autotune cache key them) and
tall (rows > cols as stored: the executor runs their NS on the transpose; bench --as-stored). What the NS rows
and the executor's autotune cache must hold so that the simulator prices exactly the batches the
plans run (traces/kernels/retune-2026-12-04/README.md: a re-tune changes the rows, the rows
change the plans' batches, so the list is taken again from the new plans before the rows are
measured).

    python3 tools/plan_ns_shapes.py [--min-side N] [--out-prefix P] PROGRAM.json...

Programs are `dmuon plan -o FILE` (or a validation case's program.json). Without --out-prefix the
lists go to stdout, each after its '#' line; with it to P.ALGO.txt and P.ALGO.tall.txt.
--min-side N keeps shapes whose short side is >= N (default 1)."""
import argparse
import json
import sys


def ns_ops(path):
    with open(path) as f:
        prog = json.load(f)
    for rank in prog.get("ranks", []):
        for op in rank.get("ops", []):
            if op.get("kind") != "ns":
                continue
            m, n, b = int(op["m"]), int(op["n"]), int(op.get("batch") or 1)
            tall = min(int(op.get("tall") or 0), b)  # matrices of the batch stored tall (program.h)
            algo = op.get("algo") or "direct"
            if b > tall:
                yield min(m, n), max(m, n), b - tall, algo
            if tall:
                yield max(m, n), min(m, n), tall, algo


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("programs", nargs="+")
    ap.add_argument("--min-side", type=int, default=1)
    ap.add_argument("--out-prefix")
    a = ap.parse_args()
    shapes = {}  # algo -> (m, n) -> set of batches
    for p in a.programs:
        try:
            for m, n, b, algo in ns_ops(p):
                if min(m, n) >= a.min_side:
                    kind = algo + (".tall" if m > n else "")
                    shapes.setdefault(kind, {}).setdefault((m, n), set()).add(b)
        except (OSError, ValueError, KeyError) as e:
            sys.exit("plan_ns_shapes: %s: %s" % (p, e))
    for algo in sorted(shapes):
        lines = ["# NS shapes (ROWS COLS BATCHES) of the %s NS ops%s of: %s" % (
            algo.split(".")[0], " stored tall" if algo.endswith(".tall") else "", " ".join(a.programs))]
        for (m, n), bs in sorted(shapes[algo].items()):
            lines.append("%d %d %s" % (m, n, ",".join(str(b) for b in sorted(bs))))
        text = "\n".join(lines) + "\n"
        if a.out_prefix:
            with open("%s.%s.txt" % (a.out_prefix, algo), "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text)


if __name__ == "__main__":
    main()
