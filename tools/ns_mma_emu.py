#!/usr/bin/env python3
"""ns_mma_emu.py: a design check of kernels/ns_mma.cuh and ns_small.cu on the CPU (numpy), for a
machine without a GPU. Two parts, each a transliteration of the CUDA code's index arithmetic:
  1. fragments: the padded shared-memory tiles of load_operand, the per-lane ldmatrix(.trans)
     row addresses of mainloop and the mma.sync m16n8k16 fragment layouts of the PTX ISA, for
     every operand layout (K- or M/N-contiguous) and tile shape: the CTA tile must equal A B;
  2. programs: the op builders (nsm_op_syrk/symm/apply, wide and tall), build_direct and
     build_gram with their phases, and gemm_unit's tiling (lower tiles, mirror, clipping,
     split-K, the second output Q = Z + aI), in float64: the result must equal the float64 NS,
     and no phase may read a buffer it writes.
It checks the design, not the compiled code: the GPU test (tests/test_ns_gpu.c) does that.
    /usr/bin/python3 tools/ns_mma_emu.py      (exit 0 when both parts pass)"""
import sys

import numpy as np

def cfg(BM,BK,WM,WN,ST):
    c=dict(BM=BM,BN=BM,BK=BK,WARPS_M=WM,WARPS_N=WN,STAGES=ST)
    c['THREADS']=32*WM*WN; c['WTM']=BM//WM; c['WTN']=BM//WN; c['MF']=c['WTM']//16; c['NF']=c['WTN']//8
    c['KROW']=BK+8; c['MROW']=BM+8; c['OP']=max(BM*c['KROW'],BK*c['MROW'])
    return c
def ldsm(smem, addrs, trans):
    # addrs[l] = element offset of row supplied by lane l; returns regs[l][j] = (lo, hi)
    out=[[None]*4 for _ in range(32)]
    for l in range(32):
        g,t=l//4,l%4
        for j in range(4):
            if not trans:
                base=addrs[8*j+g]; out[l][j]=(smem[base+2*t], smem[base+2*t+1])
            else:
                out[l][j]=(smem[addrs[8*j+2*t]+g], smem[addrs[8*j+2*t+1]+g])
    return out
def run(c, AK, BKC, rng):
    BM,BN,BK=c['BM'],c['BN'],c['BK']
    A=rng.standard_normal((BM,BK)); B=rng.standard_normal((BK,BN))
    sA=np.full(c['OP'],np.nan); sB=np.full(c['OP'],np.nan)
    # load_operand layouts
    for r in range(BM):
        for k in range(BK):
            if AK: sA[r*c['KROW']+k]=A[r,k]
            else: sA[k*c['MROW']+r]=A[r,k]
    for j in range(BN):
        for k in range(BK):
            if BKC: sB[j*c['KROW']+k]=B[k,j]
            else: sB[k*c['MROW']+j]=B[k,j]
    acc=np.zeros((c['THREADS']//32,32,c['MF'],c['NF'],4))
    for warp in range(c['THREADS']//32):
        wm,wn=warp//c['WARPS_N'],warp%c['WARPS_N']
        a_off=[];b_off=[]
        for i in range(c['MF']):
            mb=wm*c['WTM']+i*16
            a_off.append([ (mb+(l&7)+8*((l>>3)&1))*c['KROW']+8*(l>>4) if AK else ((l&7)+8*(l>>4))*c['MROW']+mb+8*((l>>3)&1) for l in range(32)])
        for j in range(c['NF']//2):
            nb=wn*c['WTN']+j*16
            b_off.append([ (nb+(l&7)+8*(l>>4))*c['KROW']+8*((l>>3)&1) if BKC else ((l&7)+8*((l>>3)&1))*c['MROW']+nb+8*(l>>4) for l in range(32)])
        for kk in range(BK//16):
            af=[ldsm(sA,[o+(kk*16 if AK else kk*16*c['MROW']) for o in a_off[i]], not AK) for i in range(c['MF'])]
            bf=[[None]*c['NF'] for _ in range(32)]
            for j in range(c['NF']//2):
                r=ldsm(sB,[o+(kk*16 if BKC else kk*16*c['MROW']) for o in b_off[j]], not BKC)
                for l in range(32):
                    bf[l][2*j]=(r[l][0],r[l][1]); bf[l][2*j+1]=(r[l][2],r[l][3])
            for i in range(c['MF']):
                for j in range(c['NF']):
                    # assemble A (16x16) and B (16x8) from the fragments per the PTX layout
                    Af=np.full((16,16),np.nan); Bf=np.full((16,8),np.nan)
                    for l in range(32):
                        g,t=l//4,l%4; a=af[i][l]
                        Af[g,2*t],Af[g,2*t+1]=a[0]; Af[g+8,2*t],Af[g+8,2*t+1]=a[1]
                        Af[g,2*t+8],Af[g,2*t+9]=a[2]; Af[g+8,2*t+8],Af[g+8,2*t+9]=a[3]
                        b=bf[l][j]
                        Bf[2*t,g],Bf[2*t+1,g]=b[0]; Bf[2*t+8,g],Bf[2*t+9,g]=b[1]
                    D=Af@Bf
                    for l in range(32):
                        g,t=l//4,l%4
                        acc[warp,l,i,j]+= [D[g,2*t],D[g,2*t+1],D[g+8,2*t],D[g+8,2*t+1]]
    # epilogue mapping
    R=np.full((BM,BN),np.nan)
    for warp in range(c['THREADS']//32):
        wm,wn=warp//c['WARPS_N'],warp%c['WARPS_N']
        for l in range(32):
            g,t=l//4,l%4
            for i in range(c['MF']):
                for j in range(c['NF']):
                    for h in range(2):
                        r=wm*c['WTM']+i*16+g+8*h; cc=wn*c['WTN']+j*8+2*t
                        R[r,cc]=acc[warp,l,i,j,2*h]; R[r,cc+1]=acc[warp,l,i,j,2*h+1]
    return np.abs(R-A@B).max()
PE=[(8.28721201814563,-23.595886519098837,17.300387312530933),(4.107059111542203,-2.9478499167379106,0.5448431082926601),
(3.9486908534822946,-2.908902115962949,0.5518191394370137),(3.3184196573706015,-2.488488024314874,0.51004894012372),
(2.300652019954817,-1.6689039845747493,0.4188073119525673)]
S=1.05; CO=[(a/S,b/S**3,c/S**5) for a,b,c in PE]
def ref(G,gram=False):
    X=G.T if G.shape[0]>G.shape[1] else G
    X=X/(np.linalg.norm(X)+1e-7)
    for a,b,c in CO:
        A=X@X.T; X=a*X+(b*A+c*A@A)@X
    return X.T if G.shape[0]>G.shape[1] else X
class Op(dict): pass
def op_init(g): return Op(kind='gemm',batch=g['batch'],splits=1,barrier_after=1,alpha_pow=0,beta_pow=0,c=None,d2=None,gamma=0.,gamma2=0.,beta=0.)
def syrk(g,x,r,alpha):
    o=op_init(g); m,n=g['m'],g['n']
    o.update(M=m,N=m,K=n,sym=1,a=x,b=x,ta=0 if g['xT'] else 1,tb=0 if g['xT'] else 1,lda=n if g['xT'] else m,ldb=n if g['xT'] else m,
             sa=m*n,sb=m*n,d=r,ldc=m,ldd=m,sc=m*m,sd=m*m,alpha=alpha); return o
def symm(g,s1,s2,alpha,beta,c,gamma,d):
    o=op_init(g); m=g['m']
    o.update(M=m,N=m,K=m,sym=1,a=s1,b=s2,ta=0,tb=0,lda=m,ldb=m,ldc=m,ldd=m,sa=m*m,sb=m*m,sc=m*m,sd=m*m,alpha=alpha,beta=beta if c else 0.,c=c,gamma=gamma,d=d); return o
def apply(g,s,x,alpha,beta,c,d):
    o=op_init(g); m,n=g['m'],g['n']; o.update(K=m,sym=0)
    if g['xT']: o.update(M=m,N=n,a=s,ta=0,lda=m,b=x,tb=1,ldb=n,sa=m*m,sb=m*n,ldc=n,ldd=n)
    else: o.update(M=n,N=m,a=x,ta=0,lda=m,b=s,tb=0,ldb=m,sa=m*n,sb=m*m,ldc=m,ldd=m)
    o.update(sc=m*n,sd=m*n,alpha=alpha,beta=beta if c else 0.,c=c,d=d); return o
def build_direct(ops,a,x0,raw):
    g=a['g']; x=x0
    for it,(ca,cb,cc) in enumerate(CO):
        last=it==4; dst='out' if last else ('x1' if x=='x0' else 'x0')
        o=syrk(g,x,'s0',1.); o['alpha_pow']=2 if raw else 0; ops.append(o)
        ops.append(symm(g,'s0','s0',cc,cb,'s0',0.,'s1'))
        o=apply(g,'s1',x,1.,ca,x,dst); o['alpha_pow']=o['beta_pow']=raw; ops.append(o)
        x=dst; raw=0
def build_gram(ops,a,x0,raw,restarts=1<<2):
    g=a['g']; x=x0; xn='x1' if x0=='x0' else 'x0'
    R,Rn,Z,RZ,Q,Qn='s0','s1','s2','s3','s4','s5'; have_q=0; n_it=5
    o=syrk(g,x,R,1.); o['alpha_pow']=2 if raw else 0; ops.append(o)
    for it,(ca,cb,cc) in enumerate(CO):
        if it>0 and (restarts>>it&1) and have_q:
            o=apply(g,Q,x,1.,0.,None,xn); o['alpha_pow']=raw; ops.append(o)
            old=x; x=xn; xn=('x1' if x=='x0' else 'x0') if old=='in' else old; raw=0
            ops.append(syrk(g,x,R,1.)); have_q=0
        need_r= it<n_it-1 and not (restarts>>(it+1)&1)
        if not have_q and not need_r:
            ops.append(symm(g,R,R,cc,cb,R,ca,Q)); have_q=1; continue
        o=symm(g,R,R,cc,cb,R,0.,Z)
        if not have_q: o['d2']=Q; o['gamma2']=ca
        ops.append(o)
        upd_q=have_q; nph=0
        if need_r: ops.append(symm(g,R,Z,1.,ca,R,0.,RZ)); nph+=1
        if upd_q: ops.append(symm(g,Q,Z,1.,ca,Q,0.,Qn)); nph+=1
        if nph==2: ops[-2]['barrier_after']=0
        if need_r: ops.append(symm(g,Z,RZ,1.,ca,RZ,0.,Rn)); R,Rn=Rn,R
        if upd_q: Q,Qn=Qn,Q
        have_q=1
    o=apply(g,Q,x,1.,0.,None,'out'); o['alpha_pow']=raw; ops.append(o)
def Aget(buf,o,e,i,k):
    p=buf[o['a']][e*o['sa']:]
    return p[i*o['lda']+k] if o['ta']==0 else p[k*o['lda']+i]
def run_gemm(bufs,o,edge,scale):
    tm_=-(-o['M']//edge); tn_=-(-o['N']//edge)
    tiles=[(a,b) for a in range(tm_) for b in range(a+1)] if o['sym'] else [(a,b) for a in range(tm_) for b in range(tn_)]
    M,N,K=o['M'],o['N'],o['K']
    for e in range(o['batch']):
        pa=bufs[o['a']][e*o['sa']:]; pb=bufs[o['b']][e*o['sb']:]
        Am=np.array([[ (pa[i*o['lda']+k] if o['ta']==0 else pa[k*o['lda']+i]) for k in range(K)] for i in range(M)])
        Bm=np.array([[ (pb[j*o['ldb']+k] if o['tb']==0 else pb[k*o['ldb']+j]) for j in range(N)] for k in range(K)])
        s=scale[e]; alpha=o['alpha']*s**o['alpha_pow']; beta=o['beta']*s**o['beta_pow']
        ksteps=-(-K//32); sp=o['splits']; per=-(-ksteps//sp)
        for tm,tn in tiles:
            r0,c0=tm*edge,tn*edge; r1,c1=min(M,r0+edge),min(N,c0+edge)
            acc=sum(Am[r0:r1,kb:min(K,kb+per*32)]@Bm[kb:min(K,kb+per*32),c0:c1] for kb in range(0,sp*per*32,per*32))
            for r in range(r0,r1):
                for c in range(c0,c1):
                    v=alpha*acc[r-r0,c-c0]
                    if o['c'] and beta!=0: v+=beta*bufs[o['c']][e*o['sc']+r*o['ldc']+c]
                    if r==c: v+=o['gamma']
                    D=bufs[o['d']]; D[e*o['sd']+r*o['ldd']+c]=v
                    w=v+(o['gamma2'] if r==c else 0)
                    if o['d2']: bufs[o['d2']][e*o['sd']+r*o['ldd']+c]=w
                    if o['sym'] and tm!=tn:
                        D[e*o['sd']+c*o['ldd']+r]=v
                        if o['d2']: bufs[o['d2']][e*o['sd']+c*o['ldd']+r]=w
def check_phases(ops):
    ph=[];cur=[]
    for o in ops:
        cur.append(o)
        if o['barrier_after']: ph.append(cur); cur=[]
    if cur: ph.append(cur)
    for p in ph:
        w=set(); r=set()
        for o in p:
            outs={o['d']}|({o['d2']} if o['d2'] else set()); ins={o['a'],o['b']}|({o['c']} if o['c'] else set())
            assert not (outs&ins), ('op reads what it writes',o)
            assert not (outs&w) , 'two ops write one buffer'
            w|=outs; r|=ins
        assert not (w&r), ('phase reads what it writes', w&r)
    return len(ph)
def fused(G_list, rows, cols, gram, io_is_work=True, edge=32, splits=1):
    m,n=min(rows,cols),max(rows,cols); xT=rows<=cols; batch=len(G_list)
    g=dict(m=m,n=n,xT=xT,batch=batch)
    bufs={k:np.full(batch*(m*n if k in('in','out','x0','x1') else m*m),np.nan) for k in ['in','out','x0','x1','s0','s1','s2','s3','s4','s5']}
    for e,G in enumerate(G_list): bufs['in'][e*m*n:(e+1)*m*n]=G.reshape(-1)
    scale=[1/(np.linalg.norm(G)+1e-7) for G in G_list]
    ops=[]; fold=io_is_work
    if not fold:
        bufs['x0'][:]=bufs['in']*np.repeat(scale,m*n)
    x0='in' if fold else 'x0'
    (build_gram if gram else build_direct)(ops,dict(g=g),x0,1 if fold else 0)
    nph=check_phases(ops)
    for o in ops:
        o['splits']=splits
        run_gemm(bufs,o,edge,scale)
    return [bufs['out'][e*m*n:(e+1)*m*n].reshape(rows,cols) for e in range(batch)], len(ops), nph


def main():
    bad = 0
    rng = np.random.default_rng(1)
    for name, c in [("32x32", cfg(32, 32, 2, 2, 3)), ("64x64", cfg(64, 32, 2, 2, 3)), ("128x128", cfg(128, 32, 2, 4, 4))]:
        for AK in (True, False):
            for BKC in (True, False):
                e = run(c, AK, BKC, rng)
                bad += not e < 1e-9
                print(f"fragments {name} A {'K' if AK else 'M'}-contiguous B {'K' if BKC else 'N'}-contiguous: max error {e:.1e}")
    rng = np.random.default_rng(0)
    for rows, cols in [(40, 72), (72, 40), (64, 64), (48, 200)]:
        for gram in (False, True):
            for fold in (True, False):
                for edge, sp in ((32, 1), (16, 3)):
                    Gs = [rng.standard_normal((rows, cols)) for _ in range(2)]
                    outs, nops, nph = fused(Gs, rows, cols, gram, fold, edge, sp)
                    err = max(np.linalg.norm(o - ref(G)) / np.linalg.norm(ref(G)) for o, G in zip(outs, Gs))
                    bad += not err < 1e-10
                    print(f"program {rows}x{cols} {'gram' if gram else 'direct'} fold {int(fold)} tile {edge} splits {sp}: "
                          f"{nops} products in {nph} phases, rel err vs float64 NS {err:.1e}")
    print("ok" if not bad else f"{bad} FAILED")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
