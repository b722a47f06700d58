#!/bin/bash
# The forms tried, alternated: user seconds of Qwen2.5-7B flat at 4096 GPUs (5 runs each, sorted) and
# the world candidate's simulation of Moonlight-16B --hsdp --zero 3 at 4096 (4 runs each)
#   ./forms.sh BASE FIRST NEW W16   (bf2c4acd's binary; views made at every wide flow's start and
#   replayed to the root; this change; this change with SIM_NET_WIDE_MIN 16)
B=$1; F=$2; N=$3; W=$4
for i in 1 2 3 4 5; do for b in $B $F $N; do /usr/bin/time -f "$(basename $b) %U" -a -o /tmp/forms-$(basename $b).txt $b sim -m qwen2.5-7b -g 4096 --quiet > /dev/null 2>&1; done; done
for b in $B $F $N; do printf 'qwen2.5-7b 4096 | %s | user s: %s\n' $(basename $b) "$(awk '{print $2}' /tmp/forms-$(basename $b).txt | sort -n | tr '\n' ' ')"; rm /tmp/forms-$(basename $b).txt; done
for i in 1 2 3 4; do for b in $N $W; do
  printf 'moonlight world lpt | %s | %s\n' $(basename $b) "$($b sim -m moonlight-16b-a3b -g 4096 --hsdp --zero 3 --hsdp-muon world --balance lpt 2>&1 | grep -oE 'rate updates in [0-9.]+ s')"
done; done
