import sys, statistics
def preds(p):
    d={}
    for l in open(p):
        if l.startswith('#') or not l.strip(): continue
        a,m,n,b,us,src=l.split()[:6]
        d[(a,int(m),int(n),int(b))]=(float(us),src)
    return d
pb=preds(sys.argv[1]); pa=preds(sys.argv[2])
meas={}
for f in sys.argv[3:]:
    hdr=None
    for l in open(f):
        if l.startswith('#'): continue
        r=l.strip().split(',')
        if r[0]=='gpu': hdr=r; continue
        x=dict(zip(hdr,r))
        if x['op']!='ns': continue
        meas[(x['algo'],int(x['m']),int(x['n']),int(x['batch']))]=float(x['median_us'])
print("# algo rows cols batch measured_us predicted_us error% source   (predictions: traces/kernels/heldns2-2026-12-05/predictions-b.txt, written before the call; error_a: predictions.txt, the rule before cfc88a6)")
groups={}
for k in sorted(pb):
    if k not in meas: continue
    m=meas[k]; p,src=pb[k]; e=100*(p-m)/m; ea=100*(pa[k][0]-m)/m if k in pa else float('nan')
    g='eager' if k[0].endswith('eager') else 'graph'
    groups.setdefault(g,[]).append((e,ea))
    print("%-12s %6d %6d %3d %10.1f %10.1f %+6.1f %-12s (error_a %+6.1f)"%(k[0],k[1],k[2],k[3],m,p,e,src,ea))
for g,v in sorted(groups.items()):
    e=[x[0] for x in v]; ea=[x[1] for x in v]
    print("# %s: %d rows, mean |error| %.2f%%, median %+.2f%%, within 10%%: %d; the rule before: mean |error| %.2f%%, within 10%%: %d"%(g,len(e),sum(map(abs,e))/len(e),statistics.median(e),sum(abs(x)<=10 for x in e),sum(map(abs,ea))/len(ea),sum(abs(x)<=10 for x in ea)))
allv=[x[0] for v in groups.values() for x in v]
print("# all: %d rows, mean |error| %.2f%%, median %+.2f%%, within 10%%: %d"%(len(allv),sum(map(abs,allv))/len(allv),statistics.median(allv),sum(abs(x)<=10 for x in allv)))
miss=[k for k in pb if k not in meas]
print("# predicted rows not measured: %d %s"%(len(miss),miss[:5]))
