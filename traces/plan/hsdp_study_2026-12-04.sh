#!/bin/bash
# HSDP study: flat, --hsdp (AdamW auto), --hsdp --hsdp-adamw replicas, --hierarchical
cd "$(dirname "$0")/../.."  # the repository root
printf '%-18s %5s %-16s %10s %10s %6s %12s\n' model gpus scheme step_ms exposed_ms ns_ops internode_GB
for m in qwen2.5-7b wall-oss-flow llama-3.2-3b moonlight-16b-a3b; do
 for g in 16 32 128 256; do
  for s in flat hsdp hsdp-replicas hierarchical; do
   case $s in flat) o="";; hsdp) o="--hsdp";; hsdp-replicas) o="--hsdp --hsdp-adamw replicas";; hierarchical) o="--hierarchical";; esac
   out=$(./dmuon sim --model $m --gpus $g --cluster a800 $o 2>&1)
   st=$(printf '%s\n' "$out" | sed -n 's/^step time *\([0-9.]*\) ms.*/\1/p')
   ex=$(printf '%s\n' "$out" | sed -n 's/^  exposed comm *\([0-9.]*\) ms.*/\1/p')
   pl=$(./dmuon plan --model $m --gpus $g --cluster a800 $o 2>&1)
   ns=$(printf '%s\n' "$pl" | sed -n 's/^  ns  *\([0-9]*\)$/\1/p')
   net=$(printf '%s\n' "$pl" | sed -n 's/^network *\([0-9.]*\) GB.*/\1/p')
   printf '%-18s %5s %-16s %10s %10s %6s %12s\n' $m $g $s "$st" "$ex" "$ns" "$net"
  done
 done
done
