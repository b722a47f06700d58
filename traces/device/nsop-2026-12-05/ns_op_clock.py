import sys, csv, collections
sys.path.insert(0,'tools')
import clock_trace as ct
clk, tr = sys.argv[1], sys.argv[2]
marks,t,c = ct.read_clock(clk); t0=marks[-1]
rows=[l for l in open(tr) if l.strip() and not l.startswith('#')]
ops=[]
for r in csv.DictReader(rows):
    if r['kind']!='ns' or r['rank']!='0': continue
    a=t0+float(r['ts_us'])*1e3; d=float(r['dur_us'])
    ops.append((float(r['ts_us']),int(r['op']),d,float(r['flops']),float(r['bytes']),ct.mhz(t,c,a,a+d*1e3)))
ops.sort()
g=collections.defaultdict(list)
for ts,i,d,f,b,m in ops: g[f].append((d,m,ts))
print("# flops (GFLOP)  ops  mean us  mean clock MHz  first start ms  (%s)"%tr.split('/')[-1])
for f,L in sorted(g.items()):
    print("%12.1f %4d %10.1f %8.0f %10.1f"%(f/1e9,len(L),sum(x[0] for x in L)/len(L),sum(x[1] or 0 for x in L)/len(L),L[0][2]/1e3))
