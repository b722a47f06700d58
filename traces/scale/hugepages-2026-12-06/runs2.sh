#!/bin/sh
# After the kept slab blocks: WALL-OSS --hsdp at 4096 GPUs, before (OLD) and after (NEW)
# alternated, three rounds; each line: binary, wall s, user s, sys s, peak RSS KiB, page faults.
#   sh runs2.sh OLD_DMUON NEW_DMUON > runs2.txt
for round in 1 2 3; do
    for bin in "$1" "$2"; do
        perf stat -x, -e page-faults -o /tmp/hp2.pf /usr/bin/time -f "%e %U %S %M" -o /tmp/hp2.t \
            "$bin" sim -m wall-oss-flow -g 4096 --hsdp > /tmp/hp2-$round.out 2>&1
        echo "$bin $(cat /tmp/hp2.t) $(grep page-faults /tmp/hp2.pf | cut -d, -f1) $(grep '^step time' /tmp/hp2-$round.out)"
    done
done
