# torch._scaled_mm with tensorwise (one fp32 scale per operand) vs rowwise (a scale per row of A and per
# column of B) scaling, bf16 output, at Llama-3 8B / 70B GEMM shapes, against torch.mm in bf16; and the
# compiled dynamic-scaling cast of a bf16 [M, K] tensor per tensor and per row (last column: GB/s of 3
# bytes per element). Run: python3 scaled_mm.py > scaled_mm.csv (the run that made scaled_mm.csv).
import torch
def B(f,n=20):
    for _ in range(3):f()
    torch.cuda.synchronize();s=torch.cuda.Event(enable_timing=True);e=torch.cuda.Event(enable_timing=True);s.record()
    for _ in range(n):f()
    e.record();torch.cuda.synchronize();return s.elapsed_time(e)/n*1e3
print("#torch",torch.__version__,torch.cuda.get_device_name(0))
F=torch.float8_e4m3fn;bf=torch.bfloat16
print("kind,M,N,K,time_us,tflops_or_GBps")
for M,N,K in [(8192,6144,4096),(8192,4096,4096),(8192,28672,4096),(8192,4096,14336),(16384,10240,8192),(16384,8192,8192),(16384,57344,8192),(16384,8192,28672),(16384,1280,8192),(16384,8192,1024),(16384,7168,8192),(16384,8192,3584)]:
    a=torch.randn(M,K,device="cuda",dtype=bf);b=torch.randn(N,K,device="cuda",dtype=bf)
    a8=a.to(F);b8=b.to(F).t();o=torch.ones((),device="cuda");ra=torch.ones(M,1,device="cuda");rb=torch.ones(1,N,device="cuda");fl=2.0*M*N*K
    for nm,f in (("bf16",lambda:torch.mm(a,b.t())),("fp8_tensorwise",lambda:torch._scaled_mm(a8,b8,scale_a=o,scale_b=o,out_dtype=bf)),("fp8_rowwise",lambda:torch._scaled_mm(a8,b8,scale_a=ra,scale_b=rb,out_dtype=bf))):
        try:t=B(f);print(f"{nm},{M},{N},{K},{t:.2f},{fl/t/1e6:.1f}",flush=True)
        except Exception as x:print("#err",nm,str(x)[:80])
    if M*K not in (8192*4096,16384*8192) or N not in (6144,10240):continue
    def ct():s=448.0/a.abs().amax().float().clamp(min=1e-12);return (a.float()*s).clamp(-448,448).to(F)
    def cr():s=448.0/a.abs().amax(dim=1,keepdim=True).float().clamp(min=1e-12);return (a.float()*s).clamp(-448,448).to(F)
    for nm,f in (("cast_tensorwise",ct),("cast_rowwise",cr)):
        try:t=B(torch.compile(f));print(f"{nm},{M},{K},0,{t:.2f},{3.0*M*K/t/1e3:.1f}",flush=True)
        except Exception as x:print("#err",nm,str(x)[:80])
