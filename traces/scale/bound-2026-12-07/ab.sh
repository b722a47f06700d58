#!/bin/sh
# A/B of glibc's heap thresholds set in main (dmuon.c) against the same build without them, both
# with the stop's bound: `sim -g 4096 --hsdp --quiet`, alternating, ROUNDS rounds (default 2).
# Usage: ab.sh PLAIN_BIN MALLOPT_BIN [ROUNDS]   columns: model binary round wall user sys rss_KB minflt
P=$1 M=$2 N=${3:-2}
for m in moonlight-16b-a3b qwen2.5-vl-3b wall-oss-flow qwen2.5-7b deepseek-v4-pro; do
    i=1
    while [ $i -le $N ]; do
        for b in plain mallopt; do
            bin=$P; [ $b = mallopt ] && bin=$M
            /usr/bin/time -f "$m $b $i %e %U %S %M %R" "$bin" sim -m "$m" -g 4096 --hsdp --quiet > /dev/null 2> /tmp/ab.err
            tail -1 /tmp/ab.err
        done
        i=$((i + 1))
    done
done
