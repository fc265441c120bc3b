"""What the bench observes, below every stage: the machine (machine.py: what it is, its class, the code's
fingerprint), NVML guarded (nvml.py), and while a run runs its process tree's memory and the machine's load
(sample.py) and its energy (energy.py)."""
