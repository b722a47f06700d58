# scale.gp: the plots of a `dmuon scale` study. dmuon scale runs it as
#   gnuplot -e "outdir='OUT/.plot.XXXXXX'; dir='OUT'; strategies='adamw muon-ddp ...'; title_text='MODEL on CLUSTER'" plots/scale.gp
# It reads OUT/scale.dat (one block per strategy, in the order of `strategies`; columns: gpus,
# strategy, step_ms, forward_ms, backward_ms, optimizer_ms, opt_kern_ms, exposed_ms, ns_max_ms,
# overhead_%, mem_GiB, fits) and writes step_time.png, optimizer_time.png and overhead.png into
# outdir (default: dir), from where dmuon renames them into OUT once gnuplot has succeeded. A
# point whose per-rank memory does not fit on the GPU (fits 0) is circled in red on every plot.
if (!exists("dir")) dir = "dmuon-scale"
if (!exists("outdir")) outdir = dir
if (!exists("strategies")) strategies = "adamw muon-ddp muon-fsdp muon-rr dmuon"
if (!exists("title_text")) title_text = ""
data = dir."/scale.dat"
n = words(strategies)

set terminal pngcairo size 960,600 enhanced font ",11"
set logscale x 2
set xlabel "GPUs"
set grid
set key outside right top
set pointsize 1.2

set output outdir."/step_time.png"
set title "Step time vs GPUs: ".title_text
set ylabel "step time (ms)"
set yrange [0:*]
# the points that do not fit in GPU memory: circled (one key entry)
nofit(y) = (column(12) == 0 ? y : 1/0)
plot for [i=1:n] data index (i-1) using 1:3 with linespoints lw 2 title word(strategies, i), \
     for [i=1:n] data index (i-1) using 1:(nofit($3)) with points pt 6 ps 3 lw 2 lc rgb "red" \
         title (i == 1 ? "does not fit in GPU memory" : "")

set output outdir."/optimizer_time.png"
set logscale y
set yrange [*:*]
set title "Optimizer time (step - forward - backward) vs GPUs: ".title_text
set ylabel "optimizer time (ms)"
plot for [i=1:n] data index (i-1) using 1:6 with linespoints lw 2 title word(strategies, i), \
     for [i=1:n] data index (i-1) using 1:(nofit($6)) with points pt 6 ps 3 lw 2 lc rgb "red" \
         title (i == 1 ? "does not fit in GPU memory" : "")

set output outdir."/overhead.png"
set title "Step-time overhead vs AdamW: ".title_text
set ylabel "overhead vs adamw (%)"
unset logscale y
set yrange [*:*]
plot for [i=1:n] data index (i-1) using 1:10 with linespoints lw 2 title word(strategies, i), \
     for [i=1:n] data index (i-1) using 1:(nofit($10)) with points pt 6 ps 3 lw 2 lc rgb "red" \
         title (i == 1 ? "does not fit in GPU memory" : ""), \
     0 with lines lc rgb "gray" dt 2 notitle
unset output
