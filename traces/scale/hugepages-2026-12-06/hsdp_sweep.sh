#!/bin/sh
# every bundled model under dmuon --hsdp at 4096 GPUs: wall, CPU, RSS, exit
DMUON=${1:-./dmuon}
printf '%-22s %6s %8s %8s %9s\n' model exit wall_s cpu_s rss_MB
for f in models/*.json; do
    m=$(basename "$f" .json)
    t=$( { /usr/bin/time -f 'TIME %e %U %S %M' "$DMUON" sim -m "$m" -g 4096 --hsdp >/dev/null 2>/tmp/hsdp_sweep.err; echo "EXIT $?"; } 2>&1)
    rc=$(printf '%s\n' "$t" | sed -n 's/^EXIT //p')
    set -- $(grep '^TIME' /tmp/hsdp_sweep.err | tail -1)
    cpu=$(awk -v u="$3" -v y="$4" 'BEGIN{printf "%.2f", u + y}')
    mb=$(awk -v k="$5" 'BEGIN{printf "%.0f", k / 1024}')
    printf '%-22s %6s %8s %8s %9s  %s\n' "$m" "$rc" "$2" "$cpu" "$mb" "$(grep -v '^TIME' /tmp/hsdp_sweep.err | head -1 | cut -c1-100)"
done
