#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "costs.h"
#include "cluster.h"
#include "program.h"
int main(int argc,char**argv){ dm_costs*c=NULL; dm_err e; if(dm_costs_load(argv[1],&c,&e)){fprintf(stderr,"%s\n",e.msg);return 1;}
 const dm_gpu*g=dm_gpu_find("H200"); char name[128],algo[16]; long id,m,n,b,tall; double real; char l[512];
 FILE*f=fopen(argv[2],"r");
 while(fgets(l,sizeof l,f)){ if(sscanf(l,"%127s %ld %ld %ld %ld %15s %ld %lf",name,&id,&m,&n,&b,algo,&tall,&real)!=8)continue;
  dm_op o; memset(&o,0,sizeof o); o.kind=DM_OP_NS; o.m=m;o.n=n;o.batch=(int)b;o.tall=(int)tall; o.algo=!strcmp(algo,"gram")?DM_NS_GRAM:DM_NS_DIRECT; o.iters=5;
  dm_cost_source s; double k=dm_costs_ns_op_kernels_us(c,g,&o,&s);
  double prep=dm_ns_prep_us(g,0,0,(double)b,(double)b*m*n);
  printf("%s %ld %ldx%ld b%ld t%ld %s real %.1f kernels %.1f (%s) prep@roof %.1f real/(k+prep) %.3f\n",name,id,m,n,b,tall,algo,real,k,dm_cost_source_name(s),prep,real/(k+prep));}
 return 0;}
