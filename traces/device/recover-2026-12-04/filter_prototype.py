# filter_prototype.py: a throwaway prototype (2026-12-04): one exponential filter against a cascade of
# n filters, each (n, tau) run against the onset of gemm-big (traces/validate/h200-16/power.json,
# 20 ms windows) and the recovery rates of recover.json (idle 0..160 ms); prints the best eight
# and the model of today (n 1, tau 27). The clock: the power model of core/power.h (h200.calib).
#   python3 traces/device/recover-2026-12-04/filter_prototype.py
import math, json
idle, gemm, limit, slope = 123.742, 952.171, 700, 0.000704621
def clock(D): return max(0.3, 1 - slope*max(0, D-limit))
def run(n, tau, segs, dt=0.25):
    # segs: list of (duration_ms, P); returns list of (t, clock)
    d=[idle]*n; t=0; out=[]
    for dur,P in segs:
        steps=int(round(dur/dt))
        for _ in range(steps):
            # explicit small-step integration of cascade
            prev=P
            for k in range(n):
                d[k]+= (prev-d[k])*(1-math.exp(-dt/tau)); prev=d[k]
            t+=dt; out.append((t, clock(d[-1])))
    return out
# onset: gemm-big from idle: measured windows 20ms: 787,791,790,707,663,670,...; normalise by first
meas=[787,791,790,707,663,670,673,673,673,673,678]
def onset_err(n,tau):
    o=run(n,tau,[(220,gemm)])
    # the clock feeds back: the GEMM rate ~ clock (compute bound). window means
    w=[sum(c for t,c in o if k*20<t<=(k+1)*20)/80 for k in range(11)]
    return sum(((w[k]/w[0])/(meas[k]/meas[0])-1)**2 for k in range(11)), w
rec={0:0.87,5:0.89,10:0.87,20:0.98,40:1.0,80:1.0,160:1.0}
def rec_err(n,tau):
    e=0; res={}
    for X,m in rec.items():
        o=run(n,tau,[(1000,gemm),(X,idle),(20,gemm)])
        t_end=1000+X
        w=[c for t,c in o if t_end+4<t<=t_end+20]
        v=sum(w)/len(w); res[X]=round(v,3); e+=(v-m)**2
    return e,res
best=[]
for n in range(1,7):
    for tau in [2,4,6,8,10,12,15,18,20,25,27,30,35,40,50]:
        eo,w=onset_err(n,tau); er,res=rec_err(n,tau)
        best.append((eo+er,n,tau,eo,er,res))
best.sort()
for b in best[:8]: print("n %d tau %d onset %.4f rec %.4f"%(b[1],b[2],b[3],b[4]), b[5])
print([b for b in best if b[1]==1 and b[2]==27][0][3:])
