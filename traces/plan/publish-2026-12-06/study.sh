#!/bin/sh
# study.sh: --publish 1 (the first layer's fetch at the end of the step) against the step without it,
# WALL-OSS and Qwen2.5-7B on A800s (the default cluster) at 32-256 GPUs; dmuon plain and with
# --ns-split auto, AdamW beside it (with and without --publish). Run from the repository root.
st() { sed -n 's/.*: step \([0-9.]*\) ms.*/\1/p'; }
printf '# %-12s %5s %10s %10s %10s %10s %10s %10s %8s %8s %8s\n' model gpus adamw adamw_pub dmuon dmuon_pub split split_pub ovh ovh_pub ovh_split_pub
for m in wall-oss-flow qwen2.5-7b; do
    for g in 32 64 128 256; do
        a=$(./dmuon sim -m $m -g $g --strategy adamw --quiet | st)
        ap=$(./dmuon sim -m $m -g $g --strategy adamw --publish 1 --quiet | st)
        d=$(./dmuon sim -m $m -g $g --quiet | st)
        dp=$(./dmuon sim -m $m -g $g --publish 1 --quiet | st)
        s=$(./dmuon sim -m $m -g $g --ns-split auto --quiet | st)
        sp=$(./dmuon sim -m $m -g $g --ns-split auto --publish 1 --quiet | st)
        awk -v m=$m -v g=$g -v a=$a -v ap=$ap -v d=$d -v dp=$dp -v s=$s -v sp=$sp 'BEGIN {
            b = a < ap ? a : ap
            printf "  %-12s %5d %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %7.2f%% %7.2f%% %7.2f%%\n", m, g, a, ap, d, dp, s, sp,
                100 * (d / a - 1), 100 * (dp / b - 1), 100 * (sp / b - 1) }'
    done
done
echo "# ovh: dmuon / adamw - 1; ovh_pub: dmuon --publish 1 / the faster adamw; ovh_split_pub: dmuon --ns-split auto --publish 1 / the same"
