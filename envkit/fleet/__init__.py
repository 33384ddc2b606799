"""Fleet: one verified environment on every node of a cluster, through a launcher (Slurm or local).

launcher.py runs one command per node (srun, or local processes for one machine); inventory.py
gathers `envkit detect --json` from each node; select.py picks the one build every node can run;
verify.py aggregates `envkit verify` and the cross-node NCCL check; create.py solves once, bundles
and installs everywhere. Nothing here prints: cli/fleet.py renders what these return.

May import: lock/ (bundle), create, plan, detect/, verify/, prefix/ and the ground floor.
"""
