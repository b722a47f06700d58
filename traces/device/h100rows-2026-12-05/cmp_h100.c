#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "costs.h"
#include "cluster.h"
#include "workload.h"
/* per H100 row: the H200 row of the same kernel (exact), the projection's ratio (roofline h100 / h200), measured ratio */
int main(int argc,char**argv){
  dm_costs*c=NULL;dm_err e; if(dm_costs_load(argv[1],&c,&e)){fprintf(stderr,"%s\n",e.msg);return 1;}
  const dm_gpu*h100=dm_gpu_find("H100"),*h200=dm_gpu_find("H200");
  FILE*f=fopen(argv[2],"r");char l[1024];
  while(fgets(l,sizeof l,f)){ if(l[0]=='#'||!strncmp(l,"gpu,",4))continue; char*F[12];int k=0; for(char*t=strtok(l,",\n");t&&k<12;t=strtok(NULL,",\n"))F[k++]=t;
    dm_kernel x;memset(&x,0,sizeof x); x.kind=!strcmp(F[1],"gemm")?DM_KERN_GEMM:!strcmp(F[1],"bgemm")?DM_KERN_BGEMM:DM_KERN_ELEM; int o=dm_kern_op_from_name(F[2]); if(o<0)continue; x.op=o;
    x.m=atoll(F[3]);x.n=atoll(F[4]);x.k=atoll(F[5]);x.batch=atoll(F[6]);x.count=1;x.param=-1;x.slot=-1;
    dm_cost_source s; double h2=dm_costs_kernel_us(c,h200,&x,&s); double proj=dm_costs_kernel_us(c,h100,&x,NULL);
    double mb=dm_kernel_memory_bound(h200,&x);
    printf("%s %s %s %s %s %s %.2f h200 %.2f %s proj %.2f real/h200 %.3f proj/h200 %.3f proj/real %.3f %s\n",F[1],F[2],F[3],F[4],F[5],F[6],atof(F[8]),h2,dm_cost_source_name(s),proj,atof(F[8])/h2,proj/h2,proj/atof(F[8]),mb?"mem":"cmp");
  } return 0;}
