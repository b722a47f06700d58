# styles.gp: the colours of dmuon's plots, in one place for every script (scale.gp, compare.gp
# load it from their own folder). Each strategy has one colour, line width and point type, picked
# by its name, so it looks the same in every plot whatever the order of --strategies; dmuon, the
# subject, is the strongest: the darkest and most saturated colour, the thickest line, and the
# scripts draw it last (on top). Each op kind (the kind_index column of compare's data files,
# core/program.h's dm_op_kind order) has one colour, named in kind_names.
strategy_color(s) = s eq 'dmuon' ? '#c0001a' : s eq 'adamw' ? '#5a5a5a' : s eq 'muon-ddp' ? '#6a9bd8' : \
    s eq 'muon-fsdp' ? '#7cbf7c' : s eq 'muon-rr' ? '#e8a84c' : '#a8a8a8'
strategy_width(s) = s eq 'dmuon' ? 4 : 2
strategy_point(s) = s eq 'dmuon' ? 7 : s eq 'adamw' ? 4 : s eq 'muon-ddp' ? 6 : s eq 'muon-fsdp' ? 8 : \
    s eq 'muon-rr' ? 12 : 1
strategy_pointsize(s) = s eq 'dmuon' ? 1.6 : 1.1

kind_names = 'forward backward broadcast reduce all-reduce all-gather reduce-scatter ns muon-update adamw wait'
n_kinds = words(kind_names)
# 0xRRGGBB of kind k (for `lc rgb variable`), and as '#rrggbb'
kind_rgb(k) = k == 0 ? 0x1f77b4 : k == 1 ? 0xff7f0e : k == 2 ? 0x2ca02c : k == 3 ? 0xd62728 : \
    k == 4 ? 0x9467bd : k == 5 ? 0x8c564b : k == 6 ? 0xe377c2 : k == 7 ? 0x7f7f7f : k == 8 ? 0xbcbd22 : \
    k == 9 ? 0x17becf : 0x000000
kind_color(k) = sprintf('#%06x', kind_rgb(k))
