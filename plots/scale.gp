# scale.gp: the plots of a `dmuon scale` study. dmuon scale runs it as
#   gnuplot -e "outdir='OUT/.plot.XXXXXX'; dir='OUT'; strategies='adamw muon-ddp ...'; title_text='MODEL on CLUSTER'" plots/scale.gp
# It reads OUT/scale.dat (one block per strategy, in the order of `strategies`; columns: gpus,
# strategy, step_ms, forward_ms, backward_ms, optimizer_ms, opt_kern_ms, exposed_ms, ns_max_ms,
# overhead_%, mem_GiB, fits) and writes step_time.png, optimizer_time.png and overhead.png into
# outdir (default: dir), from where dmuon renames them into OUT once gnuplot has succeeded.
# format='svg' draws SVG files instead (same names, .svg). Colours, widths and points come from
# styles.gp beside this script, by strategy name; dmuon is drawn last, on top of the others. A
# point whose per-rank memory does not fit on the GPU (fits 0) is circled in red on every plot.
if (!exists("dir")) dir = "dmuon-scale"
if (!exists("outdir")) outdir = dir
if (!exists("strategies")) strategies = "adamw muon-ddp muon-fsdp muon-rr dmuon"
if (!exists("title_text")) title_text = ""
if (!exists("format")) format = "png"
here = exists("ARG0") ? ARG0 : ""
slash = 0
do for [i=1:strlen(here)] { if (here[i:i] eq "/") { slash = i } }
here = slash > 1 ? here[1:slash-1] : (slash == 1 ? "" : ".")
load here."/styles.gp"
data = dir."/scale.dat"
n = words(strategies)
# the drawing order: the blocks in the order of `strategies`, dmuon's last
order = ""
do for [i=1:n] { if (word(strategies, i) ne "dmuon") { order = order." ".i } }
do for [i=1:n] { if (word(strategies, i) eq "dmuon") { order = order." ".i } }
blk(j) = int(word(order, j))
name(j) = word(strategies, blk(j))

if (format eq "svg") { set terminal svg size 960,600 enhanced font ",11"; ext = ".svg" } \
else { set terminal pngcairo size 960,600 enhanced font ",11"; ext = ".png" }
set logscale x 2
set xlabel "GPUs"
set grid
set key outside right top
set format x "%g"

set output outdir."/step_time".ext
set title "Step time vs GPUs: ".title_text
set ylabel "step time (ms)"
set yrange [0:*]
set format y "%g"
# the points that do not fit in GPU memory: circled (one key entry)
nofit(y) = (column(12) == 0 ? y : 1/0)
plot for [j=1:n] data index (blk(j)-1) using 1:3 with linespoints lw strategy_width(name(j)) \
     lc rgb strategy_color(name(j)) pt strategy_point(name(j)) ps strategy_pointsize(name(j)) title name(j), \
     for [j=1:n] data index (blk(j)-1) using 1:(nofit($3)) with points pt 6 ps 3 lw 2 lc rgb "red" \
         title (j == 1 ? "does not fit in GPU memory" : "")

set output outdir."/optimizer_time".ext
set logscale y
set yrange [*:*]
set title "Optimizer time (step - forward - backward) vs GPUs: ".title_text
set ylabel "optimizer time (ms)"
plot for [j=1:n] data index (blk(j)-1) using 1:6 with linespoints lw strategy_width(name(j)) \
     lc rgb strategy_color(name(j)) pt strategy_point(name(j)) ps strategy_pointsize(name(j)) title name(j), \
     for [j=1:n] data index (blk(j)-1) using 1:(nofit($6)) with points pt 6 ps 3 lw 2 lc rgb "red" \
         title (j == 1 ? "does not fit in GPU memory" : "")

set output outdir."/overhead".ext
set title "Step-time overhead vs AdamW: ".title_text
set ylabel "overhead vs adamw (%)"
unset logscale y
set yrange [*:*]
plot for [j=1:n] data index (blk(j)-1) using 1:10 with linespoints lw strategy_width(name(j)) \
     lc rgb strategy_color(name(j)) pt strategy_point(name(j)) ps strategy_pointsize(name(j)) title name(j), \
     for [j=1:n] data index (blk(j)-1) using 1:(nofit($10)) with points pt 6 ps 3 lw 2 lc rgb "red" \
         title (j == 1 ? "does not fit in GPU memory" : ""), \
     0 with lines lc rgb "gray" dt 2 notitle
unset output
