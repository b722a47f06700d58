# compare.gp: the plots of `dmuon compare --plot DIR` (and of `dmuon validate`'s plot case):
# the predicted and the measured timeline, one lane per (rank, stream), and the op durations,
# predicted against measured. Run as
#   gnuplot -e "dir='DIR'; title_text='MODEL STRATEGY, N ranks'; sim_source='sim'; real_source='real'" plots/compare.gp
# (optional: outdir, default dir; format='svg' for SVG files instead of PNGs). It reads the files
# dmuon compare writes into DIR:
#   timeline_predicted.dat, timeline_measured.dat: lane start_ms end_ms kind_index kind rank stream op
#     (lane 0 at the bottom; the lanes of one rank adjacent)
#   ops.dat: measured_ms predicted_ms kind_index kind rank op (the ops matched by rank and op id)
# and writes timeline.png and ops.png (ops.png only when ops.dat has a row) into outdir. Each op
# kind has its colour from styles.gp beside this script, with a key naming the kinds present;
# both timelines share one time axis; tick labels are plain numbers.
if (!exists("dir")) dir = "."
if (!exists("outdir")) outdir = dir
if (!exists("title_text")) title_text = ""
if (!exists("sim_source")) sim_source = "sim"
if (!exists("real_source")) real_source = "real"
if (!exists("format")) format = "png"
here = exists("ARG0") ? ARG0 : ""
slash = 0
do for [i=1:strlen(here)] { if (here[i:i] eq "/") { slash = i } }
here = slash > 1 ? here[1:slash-1] : (slash == 1 ? "" : ".")
load here."/styles.gp"
pred = dir."/timeline_predicted.dat"
meas = dir."/timeline_measured.dat"
ops = dir."/ops.dat"

# the extent of both timelines and the kinds they hold
stats pred using 1:3 nooutput
lanes = STATS_max_x + 1
tmax = STATS_max_y
stats meas using 1:3 nooutput
lanes = STATS_max_x + 1 > lanes ? STATS_max_x + 1 : lanes
tmax = STATS_max_y > tmax ? STATS_max_y : tmax
kinds = ""
do for [k=0:n_kinds-1] {
    stats pred using ($4 == k ? 1 : 0) nooutput
    np = STATS_sum
    stats meas using ($4 == k ? 1 : 0) nooutput
    if (np + STATS_sum > 0) { kinds = kinds." ".k }
}
kind(j) = int(word(kinds, j))
lane_label(rank, stream) = sprintf("r%d %s", rank, stream)

if (format eq "svg") { set terminal svg size 1400,(300 + 36 * lanes + 100) enhanced font ",10"; ext = ".svg" } \
else { set terminal pngcairo size 1400,(300 + 36 * lanes + 100) enhanced font ",10"; ext = ".png" }
set output outdir."/timeline".ext
set multiplot layout 2,1 title title_text
set lmargin at screen 0.07
set rmargin at screen 0.86
set xrange [0:tmax * 1.02]
set yrange [-0.5:lanes - 0.5]
set xlabel "time from step start (ms)"
set format x "%g"
set grid x
set key outside right top title "op kind"
set title "predicted (".sim_source.")"
# the lane labels come from the rows (rank and stream columns); the invisible points carry them
plot pred using 2:1:($3-$2):(0):(kind_rgb(int($4))) with vectors nohead lw 8 lc rgb variable notitle, \
     pred using (0):1:ytic(lane_label($6, strcol(7))) with points ps 0 notitle, \
     for [j=1:words(kinds)] keyentry with boxes fill solid fc rgb kind_color(kind(j)) title word(kind_names, kind(j) + 1)
set title "measured (".real_source.")"
set key off
plot meas using 2:1:($3-$2):(0):(kind_rgb(int($4))) with vectors nohead lw 8 lc rgb variable notitle, \
     meas using (0):1:ytic(lane_label($6, strcol(7))) with points ps 0 notitle
unset multiplot
set lmargin
set rmargin

stats ops using 1 nooutput
if (STATS_records > 0) {
    okinds = ""
    do for [k=0:n_kinds-1] {
        stats ops using ($3 == k ? 1 : 0) nooutput
        if (STATS_sum > 0) { okinds = okinds." ".k }
    }
    okind(j) = int(word(okinds, j))
    if (format eq "svg") { set terminal svg size 900,700 enhanced font ",10" } \
    else { set terminal pngcairo size 900,700 enhanced font ",10" }
    set output outdir."/ops".ext
    set title "op durations, predicted against measured: ".title_text
    set logscale xy
    set autoscale
    set ytics auto
    set xtics auto
    set format x "%g"
    set format y "%g"
    set grid xtics ytics
    set key outside right top title "op kind"
    set xlabel "measured (ms)"
    set ylabel "predicted (ms)"
    plot for [j=1:words(okinds)] ops using 1:($3 == okind(j) ? $2 : NaN) with points pt 7 ps 0.7 \
             lc rgb kind_color(okind(j)) title word(kind_names, okind(j) + 1), \
         x with lines lc rgb "black" title "predicted = measured"
    unset output
}
