# compare.gp: predicted (sim) against measured (real-gpu) timelines; written by dmuon compare.
# Run from anywhere: gnuplot -e "dir='DIR'" compare.gp (dir defaults to '/root/out/logs/validate/plot').
if (!exists("dir")) dir = '/root/out/logs/validate/plot'
if (!exists("outdir")) outdir = dir
title_text = 'llama-3.2-3b.dmuon.interleave.1gpu.1024tok (predicted against measured)'
set terminal pngcairo size 1400,508 font ',10'
set output outdir.'/timeline.png'
set multiplot layout 2,1 title title_text."\ncolours: forward blue, backward orange, broadcast green, reduce red, all-reduce purple, all-gather brown, reduce-scatter pink, ns grey, muon-update olive, adamw cyan"
set xrange [0:329.593193]
set yrange [-0.5:3-0.5]
set xlabel 'time from step start (ms)'
set ytics ('r0 compute' 2, 'r0 comm-hi' 1, 'r0 comm-lo' 0)
set grid x
unset key
set palette defined (0 '#1f77b4', 1 '#ff7f0e', 2 '#2ca02c', 3 '#d62728', 4 '#9467bd', 5 '#8c564b', 6 '#e377c2', 7 '#7f7f7f', 8 '#bcbd22', 9 '#17becf', 10 '#000000')
set cbrange [0:10]
unset colorbox
set title 'predicted (sim)'
plot dir.'/timeline_predicted.dat' using 2:1:($3-$2):(0):4 with vectors nohead lw 8 lc palette
set title 'measured (real-gpu)'
plot dir.'/timeline_measured.dat' using 2:1:($3-$2):(0):4 with vectors nohead lw 8 lc palette
unset multiplot
set terminal pngcairo size 800,700 font ',10'
set output outdir.'/ops.png'
set title 'op durations: predicted against measured ('.title_text.')'
set logscale xy
set autoscale
unset yrange
set ytics auto
set key top left
set xlabel 'measured (ms)'
set ylabel 'predicted (ms)'
plot dir.'/ops.dat' using 1:2:3 with points pt 7 ps 0.6 lc palette title 'ops', x with lines lc 'black' title 'predicted = measured'
