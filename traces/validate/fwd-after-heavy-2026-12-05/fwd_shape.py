import csv,sys,subprocess,os,glob
def load(f):
    fh=open(f); fh.readline()
    return [r for r in csv.DictReader(fh)]
for d in sorted(glob.glob(sys.argv[1]+"/*/")):
    name=os.path.basename(d.rstrip('/'))
    if not os.path.exists(d+"program.json"): continue
    subprocess.run(["./dmuon","sim","--program",d+"program.json","--cluster","h200","--calibration","traces/calib/h200.calib","--trace","/tmp/fs.csv"],capture_output=True)
    R=[r for r in load(d+"real.csv") if r['kind']=='forward' and r['rank']=='0']
    S=[r for r in load("/tmp/fs.csv") if r['kind']=='forward' and r['rank']=='0']
    if len(R)!=len(S) or len(R)<4: print(name,"mismatch",len(R),len(S)); continue
    t0=float(R[0]['ts_us'])
    rat=[(float(r['ts_us'])-t0, float(s['dur_us'])/float(r['dur_us'])) for r,s in zip(R,S) if float(r['dur_us'])>500]
    if not rat: continue
    n=len(rat); q=max(1,n//4)
    first=sum(x for _,x in rat[:q])/q; last=sum(x for _,x in rat[-q:])/q
    print("%-55s n=%2d first=%.3f last=%.3f  span=%.0fms"%(name,n,first,last,rat[-1][0]/1000))
