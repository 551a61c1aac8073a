import gc, time, sys
from benchmarks.throughput import population_steps, sb3_steps
from frd.agents import kernel
kernel.warm_up(); population_steps(2, 200, 1)
if "sb3" in sys.argv: sb3_steps(16000)
if "freeze" in sys.argv: gc.freeze()
for _ in range(2):
    t=time.process_time(); n,_c=population_steps(64, 2000, 1); print(sys.argv[1:], "rate", n/(time.process_time()-t), "gc", gc.get_stats()[2]["collections"])
