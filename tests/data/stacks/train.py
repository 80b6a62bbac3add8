import faulthandler, os, signal, sys, threading, time
import torch, torch.distributed as dist

def load_batch(rank):
    time.sleep(90)

def step(rank):
    if rank == 1:
        load_batch(rank)
    t = torch.ones(4)
    dist.all_reduce(t)

def main():
    rank = int(sys.argv[1])
    f = open(f"/tmp/r3fx/rank-{rank}.txt", "w")
    faulthandler.register(signal.SIGUSR2, file=f, all_threads=True)
    threading.Thread(target=time.sleep, args=(60,), daemon=True, name="worker").start()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{29000+int(os.environ['PORTX'])}", rank=rank, world_size=2)
    step(rank)

if __name__ == "__main__":
    main()
