#!/bin/sh
# The page-fault change (huge-page advised large arrays, the program's slab): before and after,
# alternated, three rounds; each line: binary, case, wall s, user s, sys s, peak RSS KiB, page
# faults; the reports compared without their speed/plan-seconds lines.
#   sh runs.sh OLD_DMUON NEW_DMUON > runs.txt
OLD=$1 NEW=$2
cases="wall-oss-flow:4096:--hsdp qwen2.5-72b:4096:--hsdp qwen2.5-7b:4096:--hsdp qwen2.5-72b:16384: deepseek-v3:1024:"
for round in 1 2 3; do
    for c in $cases; do
        m=${c%%:*}; rest=${c#*:}; g=${rest%%:*}; f=${rest#*:}
        for b in old new; do
            bin=$OLD; [ $b = new ] && bin=$NEW
            perf stat -x, -e page-faults -o /tmp/hp.pf /usr/bin/time -f "%e %U %S %M" -o /tmp/hp.t \
                "$bin" sim -m "$m" -g "$g" $f > "/tmp/hp-$b-$m-$g.out" 2>&1
            pf=$(grep page-faults /tmp/hp.pf | cut -d, -f1)
            echo "$b $m $g ${f:-flat} $(cat /tmp/hp.t) $pf"
        done
        if [ "$round" = 1 ]; then
            grep -vE '^speed:|solver|plan .*s wall|^  balance' "/tmp/hp-old-$m-$g.out" > /tmp/hp-a
            grep -vE '^speed:|solver|plan .*s wall|^  balance' "/tmp/hp-new-$m-$g.out" > /tmp/hp-b
            cmp -s /tmp/hp-a /tmp/hp-b && echo "# $m $g ${f:-flat}: reports identical (speed lines aside)" ||
                { echo "# $m $g ${f:-flat}: reports DIFFER"; diff /tmp/hp-a /tmp/hp-b | head -10; }
        fi
    done
done
