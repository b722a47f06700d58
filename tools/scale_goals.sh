#!/bin/sh
# tools/scale_goals.sh: the simulator's cost at scale (issue 16, item 4): every bundled model
# under every strategy at GPUS ranks (default 1024), the default plan options, one run each:
# wall and CPU seconds (user + sys) and peak resident size from /usr/bin/time, the exit status
# (a simulation the memory check refuses exits 1 and says how much it would need), and whether
# it meets the goal (CPU < 3 s and < 1.5 GB at 1024 GPUs). Output: a table on stdout.
#   tools/scale_goals.sh [DMUON] [GPUS]
DMUON=${1:-./dmuon}
G=${2:-1024}
printf '%-22s %-10s %6s %8s %8s %9s  %s\n' model strategy exit wall_s cpu_s rss_MB goal
for f in models/*.json; do
    m=$(basename "$f" .json)
    for s in adamw muon-ddp muon-fsdp muon-rr dmuon; do
        t=$( { /usr/bin/time -f 'TIME %e %U %S %M' "$DMUON" sim -m "$m" -g "$G" --strategy "$s" >/dev/null 2>/tmp/scale_goals.err; echo "EXIT $?"; } 2>&1)
        rc=$(printf '%s\n' "$t" | sed -n 's/^EXIT //p')
        set -- $(grep '^TIME' /tmp/scale_goals.err | tail -1)
        cpu=$(awk -v u="$3" -v y="$4" 'BEGIN{printf "%.2f", u + y}')
        mb=$(awk -v k="$5" 'BEGIN{printf "%.0f", k / 1024}')
        goal=$(awk -v c="$cpu" -v m="$mb" -v r="$rc" 'BEGIN{print (r == 0 && c < 3 && m < 1536) ? "met" : "NOT met"}')
        [ "$rc" != 0 ] && goal="$goal: $(grep -v '^TIME' /tmp/scale_goals.err | head -1 | cut -c1-110)"
        printf '%-22s %-10s %6s %8s %8s %9s  %s\n' "$m" "$s" "$rc" "$2" "$cpu" "$mb" "$goal"
    done
done
