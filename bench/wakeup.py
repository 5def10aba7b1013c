"""The machine's own wake-up cost: the median round trip of one byte
between two processes over a socketpair. On a VM whose idle vCPUs halt,
this alone is tens of microseconds; latency figures of the supervisor
(every brokered call is a round trip through it) carry it too."""
import os
import socket
import statistics
import time

a, b = socket.socketpair()
pid = os.fork()
if pid == 0:
    a.close()
    while (d := b.recv(1)):
        b.send(d)
    os._exit(0)
b.close()
samples = []
for _ in range(2000):
    t = time.perf_counter_ns()
    a.send(b"x")
    a.recv(1)
    samples.append(time.perf_counter_ns() - t)
a.close()
os.waitpid(pid, 0)
print(f"process round trip (wake-up cost), median of 1900: {statistics.median(samples[100:]) / 1000:.1f} µs")
