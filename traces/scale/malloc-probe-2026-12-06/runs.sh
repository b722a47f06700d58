cd /work/main
T="glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=17179869184:glibc.malloc.top_pad=268435456"
for i in 1 2 3; do
 for m in wall-oss-flow qwen2.5-7b; do
  /usr/bin/time -f "TIME %e %U %S %M $m plain" ./dmuon sim -m $m -g 4096 --hsdp 2>&1 >/dev/null | tail -1
  GLIBC_TUNABLES=$T /usr/bin/time -f "TIME %e %U %S %M $m tuned" ./dmuon sim -m $m -g 4096 --hsdp 2>&1 >/dev/null | tail -1
 done
done
