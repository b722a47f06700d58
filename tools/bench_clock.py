#!/usr/bin/env python3
"""bench_clock.py: the SM clock each row of a `dmuon bench kernels` run was timed at, from the
run's stdout (with DMUON_CLOCK_TRACE set the bench prints, after each row, "# clock window k: ...",
the timing window of that row's last timed calls) and the clock file the run wrote (marks 2k and
2k + 1 bracket window k: kernels/ns_elem.cu ns_time_events). One line per row: the row's human
fields, the window's length (ms) and its mean clock (MHz, cycles over nanoseconds).

    python3 tools/bench_clock.py BENCH_STDOUT.txt CLOCK_FILE
"""
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0] if "/" in __file__ else ".")
import clock_trace as ct  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: bench_clock.py BENCH_STDOUT.txt CLOCK_FILE")
    marks, t, c = ct.read_clock(sys.argv[2])
    if len(t) < 2:
        sys.exit("bench_clock: %s holds too few reads" % sys.argv[2])
    last = None
    print("# shape batch op algo dtype var median_us | window_ms clock_MHz   (%s)" % sys.argv[2])
    for line in ct.read_file(sys.argv[1]):
        s = line.strip()
        if s.startswith("# clock window"):
            k = int(s.split()[3].rstrip(":"))
            if last is None or 2 * k + 1 >= len(marks):
                continue
            a, b = marks[2 * k], marks[2 * k + 1]
            m = ct.mhz(t, c, a, b)
            f = last.split()
            print("%-14s %5s %-6s %-7s %-5s %5s %10s | %9.3f %8s" % (f[0], f[1], f[2], f[3], f[4], f[5], f[6],
                                                                 (b - a) / 1e6, "%.0f" % m if m else "-"))
            last = None
        elif s and not s.startswith("#") and len(s.split()) >= 7 and "x" in s.split()[0]:
            last = s


if __name__ == "__main__":
    main()
