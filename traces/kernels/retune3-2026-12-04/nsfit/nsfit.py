# nsfit.py: per NS op of validation cases, the measured op (executor trace) less the preparation the simulator prices in it, against the cost table row(s) of its shape and batch. Usage (the merged table of the call at /tmp/m31.csv): python3 nsfit.py CASE_DIR...
import csv,json,sys,subprocess,os
from collections import defaultdict
tab={}
for r in csv.DictReader(l for l in open('/tmp/m31.csv') if not l.startswith('#')):
    if r['op']=='ns': tab[(r['algo'],int(r['m']),int(r['n']),int(r['batch']))]=float(r['median_us'])
out=[]
for C in sys.argv[1:]:
    prog=json.load(open(C+'/program.json'))
    ops={}
    for r in prog['ranks']:
        for i,op in enumerate(r['ops']):
            if op.get('kind')=='ns': ops[i]=op
    subprocess.run(['./dmuon','sim','--program',C+'/program.json','--cluster','h200','--calibration','traces/calib/h200.calib','--costs','/tmp/m31.csv,traces/costs/h200-work-cool.csv','--steps','3','--csv','/tmp/_s.csv','--quiet'],check=True,stdout=subprocess.DEVNULL)
    def per(f):
        d=defaultdict(list)
        for r in csv.reader(l for l in open(f) if not l.startswith('#')):
            if r[0]!='rank' and r[3]=='ns': d[int(r[2])].append(float(r[5]))
        return d
    S=per('/tmp/_s.csv'); M=per(C+'/real.csv')
    for i,op in ops.items():
        if i not in M or i not in S: continue
        m,n,b,t=op['m'],op['n'],op.get('batch',1),op.get('tall',0); a=op.get('algo') or 'direct'
        if op.get('eager'): a='direct-eager'
        mm,nn=min(m,n),max(m,n); w=b-t; rows=0; ok=True
        if w: rows+=tab.get((a,mm,nn,w),float('nan'))
        if t: rows+=tab.get((a,nn,mm,t),float('nan'))
        if rows!=rows: continue
        sim=S[i][-1]; prep=sim-rows*1.07171
        meas=sorted(M[i])[len(M[i])//2]
        out.append((rows,meas-prep,os.path.basename(C)[:28],(mm,nn,b,t,a)))
out.sort()
import math
for rows,k,c,key in out:
    print('%-28s %-34s rows %9.1f  kern %9.1f  ratio %.3f diff %7.1f'%(c,key,rows,k,k/rows,k-rows))
