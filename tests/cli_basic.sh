#!/bin/sh
# cli_basic.sh: the dmuon command's conventions: --help, --version, exit status 2 on bad usage,
# and the model commands on bundled models (golden values).
. "$DM_SRCDIR/tests/tap.sh"
: "${DMUON:?}"

like "--help lists commands" "$($DMUON --help)" "Commands:"
like "--version" "$($DMUON --version)" "dmuon "
is "unknown command exits 2" "$(status_of $DMUON frobnicate)" 2
is "unknown option exits 2" "$(status_of $DMUON --frobnicate)" 2
is "no command exits 2" "$(status_of $DMUON)" 2
like "unknown command message" "$($DMUON frobnicate 2>&1)" "unknown command 'frobnicate'"
is "models: unknown option exits 2" "$(status_of $DMUON models --bogus)" 2
is "model show: unknown option exits 2" "$(status_of $DMUON model show --bogus qwen2.5-7b)" 2
is "model show: missing model exits 1" "$(status_of $DMUON model show no-such-model)" 1
like "model show: unknown model named" "$($DMUON model show no-such-model 2>&1)" 'unknown model "no-such-model"'

out=$($DMUON model show qwen2.5-7b)
like "qwen2.5-7b: 196 Muon matrices" "$out" "muon:  196 matrices"
like "qwen2.5-7b: 7.62 B parameters" "$out" "(7.62 B) in"
json=$($DMUON model show qwen2.5-7b --json)
like "model show --json totals" "$json" '"muon_matrices": 196'
csv=$($DMUON model show qwen2.5-7b --csv | head -1)
is "model show --csv header" "$csv" "tensor,rows,cols,ndim,count,stack,first_layer,layer_span,role,params,use,stream"
out=$($DMUON model show qwen2.5-7b --role '*q_proj.weight=adamw')
like "--role override moves q_proj to adamw" "$out" "muon:  168 matrices"
is "--role bad value exits 2" "$(status_of $DMUON model show qwen2.5-7b --role 'x=sgd')" 2
like "models lists wall-oss-flow" "$($DMUON models)" "wall-oss-flow"
tmp=${TMPDIR:-/tmp}/dmuon-cli.$$
mkdir -p "$tmp"
out=$($DMUON model import "$DM_SRCDIR/tests/data/hf/qwen2.5-7b.json" --out "$tmp/q.json" 2>&1)
like "model import writes a file and says so" "$out" "wrote $tmp/q.json"
like "imported model shows 196 Muon matrices" "$($DMUON model show "$tmp/q.json")" "muon:  196 matrices"
is "model import: missing file exits 1" "$(status_of $DMUON model import "$tmp/none.json")" 1
printf '{"model_type": "llama"}' > "$tmp/bad.json"
like "model import: missing key named" "$($DMUON model import "$tmp/bad.json" 2>&1)" "bad.json:1:1: expected field"
rm -rf "$tmp"
tap_end
