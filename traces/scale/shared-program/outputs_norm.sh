#!/bin/sh
# outputs_norm.sh DIR: outputs_cases.sh's DIR/case*.txt with their timing fields blanked (the
# planner's and solver's seconds, the candidates' plan_s and sim_s) -> DIR/norm/, for diff -r.
mkdir -p $1/norm
for f in $1/case*.txt; do
  sed -E -e 's/[0-9]+\.[0-9]+ s([,)]|$)/T s\1/g' \
         -e 's/^(  (lpt|milp|lpt-ns|greedy|[a-z-]+) +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9]+) +[0-9.]+ +[0-9.]+/\1 T T/' \
         -e 's/"(solver_s|plan_s|sim_s|assign_s)": [0-9.e+-]+/"\1": T/g' $f > $1/norm/$(basename $f)
done
