#!/bin/sh
# The MoE giants and two large dense models under dmuon --hsdp at 1024 and 4096 GPUs, two builds
# alternating per point. Usage: ab-giants.sh BASE_BIN NEW_BIN
B=$1 N=$2
printf '%-20s %5s %-5s %7s %7s %7s %7s  %s\n' model gpus build wall_s user_s sys_s rss_MB step
for m in deepseek-v3 kimi-k2 deepseek-v4-pro deepseek-v4-flash wan2.1-t2v-14b qwen2.5-32b; do
    for g in 1024 4096; do
        for b in base new; do
            bin=$B; [ $b = new ] && bin=$N
            /usr/bin/time -f 'TIME %e %U %S %M' "$bin" sim -m "$m" -g $g --hsdp > /tmp/ab-g.out 2> /tmp/ab-g.err
            set -- $(grep '^TIME' /tmp/ab-g.err | tail -1)
            step=$(grep -m1 '^step time' /tmp/ab-g.out | awk '{print $3, $4}')
            printf '%-20s %5s %-5s %7s %7s %7s %7.0f  %s\n' "$m" $g $b "$2" "$3" "$4" "$(echo "$5 / 1024" | bc -l)" "$step"
        done
    done
done
