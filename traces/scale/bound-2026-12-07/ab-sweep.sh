#!/bin/sh
# Every bundled model under dmuon --hsdp at 4096 GPUs, two builds alternating per model (the
# host's speed drifts by tens of percent within minutes: only a pair run back to back compares).
# Usage: ab-sweep.sh BASE_BIN NEW_BIN   columns: model build wall_s user_s sys_s rss_MB step
B=$1 N=$2
printf '%-22s %-5s %7s %7s %7s %7s  %s\n' model build wall_s user_s sys_s rss_MB step
for f in models/*.json; do
    m=$(basename "$f" .json)
    for b in base new; do
        bin=$B; [ $b = new ] && bin=$N
        /usr/bin/time -f 'TIME %e %U %S %M' "$bin" sim -m "$m" -g 4096 --hsdp > /tmp/ab-sweep.out 2> /tmp/ab-sweep.err
        set -- $(grep '^TIME' /tmp/ab-sweep.err | tail -1)
        step=$(grep -m1 '^step time' /tmp/ab-sweep.out | awk '{print $3, $4}')
        printf '%-22s %-5s %7s %7s %7s %7.0f  %s\n' "$m" $b "$2" "$3" "$4" "$(echo "$5 / 1024" | bc -l)" "$step"
    done
done
