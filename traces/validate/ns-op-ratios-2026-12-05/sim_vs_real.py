import csv,glob
def load(p):
    d={}
    for r in csv.DictReader([l for l in open(p) if not l.startswith('#')]):
        if r['kind']=='ns': d[int(r['op'])]=d.get(int(r['op']),0)+float(r['dur_us'])
    return d
ops={}
for l in open('/tmp/nsops.txt'):
    f=l.split(); ops.setdefault(f[0],{})[int(f[1])]=(int(f[2]),int(f[3]),int(f[4]),f[5],int(f[6]))
print("# the NS ops of each 1-GPU dmuon case at 4096 tokens (heldns2's cases; Llama-3.2-3B from h200-39), simulated on the program it ran (dmuon sim --program --calibration traces/calib/h200.calib --trace) against the executor's trace")
for name in sorted(ops):
    s=load('/tmp/simtr-%s.csv'%name)
    d=[x for x in glob.glob('/tmp/replay-m/cases-heldns2/validate/%s.dmuon*'%name)+glob.glob('/tmp/replay-m/cases-h200-39/validate/%s.dmuon*4096tok'%name)][0]
    r=load(d+'/real.csv')
    b1=[0,0,0]; bb=[0,0,0]
    for i,(m,n,b,a,t) in ops[name].items():
        if i not in s or i not in r: continue
        x=b1 if b==1 else bb
        x[0]+=r[i]; x[1]+=s[i]; x[2]+=1
    f=lambda x: "%3d ops real %9.1f sim %9.1f (%+5.1f%%)"%(x[2],x[0],x[1],100*(x[1]/x[0]-1)) if x[0] else "%3d ops"%0
    print("%-24s single-matrix: %s | batched: %s"%(name,f(b1),f(bb)))
