# Forks N (argv[1]) double-forked children, each grandchild orphaned at
# once, waits until no zombie is left in the PID namespace (30 s at most),
# prints the seconds from the first fork to then, the seconds after the
# last fork, and the zombies left; exits 3. The sandbox and supervisor
# benchmarks run it as the workload.
import os,sys,time
n=int(sys.argv[1])
def zombies():
    z=0
    for p in os.listdir('/proc'):
        try:
            if p.isdigit() and open('/proc/%s/stat'%p).read().rsplit(') ',1)[1][0]=='Z': z+=1
        except OSError: pass
    return z
t0=time.perf_counter()
for i in range(n):
    if os.fork()==0:
        if os.fork()==0: os._exit(0)
        os._exit(0)
    os.waitpid(-1,0)
t1=time.perf_counter()
end=t1+30
while zombies() and time.perf_counter()<end: time.sleep(0.001)
t2=time.perf_counter()
print(t2-t0,t2-t1,zombies())
sys.exit(3)
