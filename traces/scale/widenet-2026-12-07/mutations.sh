#!/bin/bash
# Each mutation of sim/net.c built and held against test_net, then net.c restored (run from the
# repository root of a built tree): does test_net catch it?
set -u
muts=(
 's/    if (b >= 0) n->wk\[c++\] = b;/    (void)b; \/* MUTATED: the best lone link dropped *\//'
 's/            if (n->f\[on->sole\].wv) wide_set(n, \&n->f\[on->sole\], on->sole_k, 1);/            \/* MUTATED: a link joined by a second flow not marked shared *\//'
 's/    if (on->n == 1 \&\& n->f\[on->sole\].wv) wide_set(n, \&n->f\[on->sole\], on->sole_k, 2); \/\* its share as a lone link \*\//    \/* MUTATED: a lone link whose capacity changed not re-ranked *\//'
)
cp sim/net.c /tmp/net.c.keep
for m in "${muts[@]}"; do
  cp /tmp/net.c.keep sim/net.c
  sed -i "$m" sim/net.c
  echo "== $(grep -o 'MUTATED: [^*]*' sim/net.c || echo 'mutation did not apply')"
  make -s tests/test_net > /dev/null 2>&1 && ./tests/test_net 2>&1 | grep -E '^not ok' | cut -c1-140
  echo "   $(./tests/test_net 2>&1 | grep -c '^not ok') of $(./tests/test_net 2>&1 | grep -c '^\(not \)\?ok') not ok"
done
cp /tmp/net.c.keep sim/net.c && make -s tests/test_net > /dev/null 2>&1
echo "== restored: $(./tests/test_net 2>&1 | grep -c '^not ok') not ok"
