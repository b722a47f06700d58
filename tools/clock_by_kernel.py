#!/usr/bin/env python3
"""clock_by_kernel.py: each forward/backward kernel of a one-rank step beside the SM clock it ran
at: the kernel's time in the step (DMUON_KERNEL_TIMES with start_us/wall_s) over its cool row
(tools/kernel_price with traces/costs/h200.csv,h200-work-cool.csv), against 1980 / the clock that
nvidia-smi read nearest its start (the device stage longprobe writes both). Per kernel kind
(pass, kind, op; kernels priced at 150 us or more): the median ratio where the clock was over
1920 and under 1720 MHz, and a least-squares line ratio = a + b (1980 / f - 1): b near 1 follows
the clock, near 0 does not. Run from the repository root with tools/kernel_price built.
    python3 tools/clock_by_kernel.py MODEL STRATEGY TOKENS KERNEL_TIMES.csv SMI_LOG
"""
import subprocess, csv, sys, time, bisect, collections, statistics
model, strat, tok, kcsv, smi = sys.argv[1:6]
K='traces/costs/h200.csv,traces/costs/h200-work-cool.csv'
rows=list(csv.DictReader(open(kcsv)))
layers=sorted(set(int(r['layer']) for r in rows))
# smi
S=[]
for l in open(smi):
    p=[x.strip() for x in l.split(',')]
    try:
        ts=time.mktime(time.strptime(p[0].split('.')[0],'%Y/%m/%d %H:%M:%S'))-time.timezone+float('0.'+p[0].split('.')[1])
        S.append((ts,int(p[1].split()[0])))
    except Exception: pass
S.sort(); St=[x[0] for x in S]
def clock(t):
    i=bisect.bisect_left(St,t)
    c=[S[j][1] for j in (i-1,i) if 0<=j<len(S)]
    return sum(c)/len(c)
pts=collections.defaultdict(list)
for L in layers:
    out=subprocess.run(['./tools/kernel_price',model,strat,tok,K,kcsv,'--layer',str(L)],capture_output=True,text=True).stdout.splitlines()
    lr=[r for r in rows if int(r['layer'])==L]
    # kernel_price lines in file order of that layer
    pl=[l for l in out if l.startswith('layer %d '%L)]
    if len(pl)!=len(lr): 
        print('layer',L,'count mismatch',len(pl),len(lr)); continue
    for r,l in zip(lr,pl):
        meas=float(l.split('in step')[1].split('us')[0]); pr=float(l.split('priced')[1].split('us')[0])
        if pr<150: continue
        key=r['pass']+' '+r['kind']+' '+r['op']
        pts[key].append((1980.0/clock(float(r['wall_s'])), meas/pr, pr))
print('# per kernel kind (priced >= 150 us): measured / cool row against 1980 / SM clock at its start; fit ratio = a + b x (1980/f - 1)')
for k,v in sorted(pts.items(), key=lambda x:-sum(p[2] for p in x[1])):
    if len(v)<4: continue
    xs=[p[0]-1 for p in v]; ys=[p[1] for p in v]
    mx=statistics.mean(xs); my=statistics.mean(ys)
    sxx=sum((x-mx)**2 for x in xs); b=sum((x-mx)*(y-my) for x,y in zip(xs,ys))/sxx if sxx>0 else float('nan'); a=my-b*mx
    hi=[p[1] for p in v if p[0]<1.03]; lo=[p[1] for p in v if p[0]>1.15]
    print('%-28s n=%4d time %7.1f ms | ratio at clock>1920: %s  at clock<1720: %s | a %.3f b %.3f'%(k,len(v),sum(p[2] for p in v)/1e3,
        '%.3f (%d)'%(statistics.median(hi),len(hi)) if hi else '-', '%.3f (%d)'%(statistics.median(lo),len(lo)) if lo else '-', a, b))
