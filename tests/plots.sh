#!/bin/sh
# plots.sh: the gnuplot scripts of plots/ (drawn as SVG, whose elements name each curve and its
# colour). scale.gp: one colour per strategy by name, the same whatever the --strategies order,
# all different; dmuon the strongest (most saturated colour, thickest line) and drawn last.
# compare.gp, on the data files of `dmuon compare --plot`: both PNGs drawn; a key entry per op
# kind present, each kind's points in its own colour; tick labels plain numbers. Skips without
# gnuplot.
. "$DM_SRCDIR/tests/tap.sh"
: "${DMUON:?}"
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "1..0 # SKIP gnuplot not installed"
    exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dmuon-plots.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
P=$DM_SRCDIR/plots
costs=$DM_SRCDIR/tests/data/sim_costs.csv

# curves SVG: "INDEX<tab>NAME<tab>R,G,B<tab>WIDTH" for each titled curve, in drawing order (the
# colour of its first line, or of its first point when it has no line)
curves() {
    awk 'BEGIN { OFS = "\t" }
         function done() { if (cur != "") print n, cur, col, w; cur = "" }
         /<g id="gnuplot_plot_[0-9]+" ><title>/ {
             done(); n = $0; sub(/.*gnuplot_plot_/, "", n); sub(/".*/, "", n)
             t = $0; sub(/.*<title>/, "", t); sub(/<\/title>.*/, "", t); cur = t; col = ""; w = 0; next }
         cur != "" && /stroke-width="/ { s = $0; sub(/.*stroke-width="/, "", s); sub(/".*/, "", s); if (s + 0 > w) w = s + 0 }
         cur != "" && col == "" && /<path stroke=.rgb\(/ { c = $0; sub(/.*<path stroke=.rgb\(/, "", c) }
         cur != "" && col == "" && /<use .*color=.rgb\(/ { c = $0; sub(/.*color=.rgb\(/, "", c) }
         cur != "" && col == "" && c != "" { sub(/\).*/, "", c); gsub(/ /, "", c); col = c; c = "" }
         /^<\/g>$/ && col != "" { done() }
         END { done() }' "$1"
}

for order in dmuon,adamw,muon-ddp,muon-fsdp,muon-rr muon-rr,muon-fsdp,muon-ddp,adamw,dmuon; do
    d=$tmp/$order
    $DMUON scale --model qwen2.5-0.5b --gpus 8,16 --strategies "$order" --costs "$costs" --no-plots --no-progress \
        --out "$d" >/dev/null 2>&1
    gnuplot -e "dir='$d'; strategies='$(echo "$order" | tr , ' ')'; title_text='test'; format='svg'" "$P/scale.gp" \
        >"$d/gnuplot.log" 2>&1
    is "scale.gp draws the step time plot ($order)" "$?" 0
    # the strategies' curves (not the red "does not fit in GPU memory" marks)
    curves "$d/step_time.svg" | awk -F'\t' '$2 != "" && $2 !~ /does not fit/ && $2 !~ /^gnuplot_plot_/' >"$d/curves"
done
a=$tmp/dmuon,adamw,muon-ddp,muon-fsdp,muon-rr/curves
b=$tmp/muon-rr,muon-fsdp,muon-ddp,adamw,dmuon/curves
is "five curves drawn" "$(wc -l <"$a" | tr -d ' ')" 5
is "each strategy has the same colour and width in either order" "$(cut -f2- "$a" | sort)" "$(cut -f2- "$b" | sort)"
is "the five colours differ" "$(cut -f3 "$a" | sort -u | wc -l | tr -d ' ')" 5
is "dmuon is drawn last (on top) in either order" "$(tail -1 "$a" | cut -f2) $(tail -1 "$b" | cut -f2)" "dmuon dmuon"
strongest=$(awk -F'\t' '{ split($3, c, ","); mx = c[1]; mn = c[1]
                   for (i = 2; i <= 3; i++) { if (c[i] + 0 > mx + 0) mx = c[i]; if (c[i] + 0 < mn + 0) mn = c[i] }
                   print mx - mn, $2 }' "$a" | sort -n | tail -1 | awk '{ print $2 }')
is "dmuon's colour is the most saturated" "$strongest" dmuon
is "dmuon's line is the thickest" "$(sort -t "$(printf '\t')" -k4,4n "$a" | tail -1 | cut -f2)" dmuon
ok "the other two plots drawn" test -s "$tmp/dmuon,adamw,muon-ddp,muon-fsdp,muon-rr/optimizer_time.svg" \
    -a -s "$tmp/dmuon,adamw,muon-ddp,muon-fsdp,muon-rr/overhead.svg"

# compare.gp on compare's data files
$DMUON sim --model llama-3.2-3b --gpus 2 --cluster h200x2 --costs "$DM_SRCDIR/traces/costs/roofline.csv" \
    --csv "$tmp/sim.csv" --quiet >/dev/null 2>&1
awk -F, 'BEGIN { OFS = "," } NR == 1 { sub(/source=sim/, "source=real") } /^#/ || /^rank/ { print; next }
         { $5 = sprintf("%.3f", $5 * 1.1); $6 = sprintf("%.3f", $6 * 1.1); print }' "$tmp/sim.csv" >"$tmp/real.csv"
$DMUON compare "$tmp/sim.csv" "$tmp/real.csv" --plot "$tmp/c" >/dev/null 2>&1
is "compare writes its data files" "$?" 0
q="dir='$tmp/c'; outdir='$tmp/c/out'; title_text='Llama-3.2-3B dmuon, 2 ranks'; sim_source='sim'; real_source='real'"
mkdir -p "$tmp/c/out"
gnuplot -e "$q" "$P/compare.gp" >"$tmp/c/gp.log" 2>&1
is "compare.gp draws (PNG)" "$?" 0
ok "timeline.png and ops.png" test -s "$tmp/c/out/timeline.png" -a -s "$tmp/c/out/ops.png"
gnuplot -e "$q; format='svg'" "$P/compare.gp" >"$tmp/c/gp.log" 2>&1
is "compare.gp draws (SVG)" "$?" 0
is "compare.gp: no gnuplot warning" "$(cat "$tmp/c/gp.log")" ""
kinds=$(awk '!/^#/ { print $4 }' "$tmp/c/ops.dat" | sort -u | tr '\n' ' ')
curves "$tmp/c/out/ops.svg" >"$tmp/c/ops.curves"
is "ops plot: one key entry per kind present, and the diagonal" \
    "$(cut -f2 "$tmp/c/ops.curves" | sort | tr '\n' ' ')" \
    "$( (printf '%s\n' $kinds; echo 'predicted = measured') | sort | tr '\n' ' ')"
is "ops plot: every kind in its own colour" "$(grep -v 'predicted = measured' "$tmp/c/ops.curves" | cut -f3 |
    sort -u | wc -l | tr -d ' ')" "$(printf '%s\n' $kinds | wc -l | tr -d ' ')"
ticks=$(grep -o '<tspan[^>]*>[^<]*</tspan>' "$tmp/c/out/ops.svg" | sed 's/<[^>]*>//g' | grep '^[0-9.e+-]*$' | tr '\n' ' ')
like "ops plot: tick labels are plain numbers" "$ticks" "0.01 0.1 1 10"
case "$ticks" in *.000000*) r=long ;; *) r=plain ;; esac
is "ops plot: no label like 1000.000000" "$r" plain
like "timeline: lanes labelled by rank and stream" "$(cat "$tmp/c/out/timeline.svg")" "r1 comm-lo"
like "timeline: a key naming the kinds" "$(cat "$tmp/c/out/timeline.svg")" "<title>backward</title>"
tap_end
