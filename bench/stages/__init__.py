"""The stages a bench goes through, a folder each, in the pipeline's order:

    planning/    plan.py (the runs, all on the same work, in rounds, within the budget, in four named steps: what
                 is asked, prepare.py the data and model checks, a GPU's steps calibrated, the plan); planned.py its
                 records, build.py its runs, fit.py the budget, planfile.py plan.json, slurm.py a job's nodes
    running/     execute.py (the one executor of every mode: rounds, budget, chunks, resume, signals), launch.py (one
                 run: its process tree under a time limit), calibrate.py (a GPU's steps, measured by launching)
    records/     record.py (runs.csv, a whole row at a time), baseline.py (the saved results compared against),
                 profiles.py (each technique's operators against the baseline's, from --profile)
    statistics/  intervals.py (the statistics of paired rounds), rules.py (the rules each row's answers follow),
                 summarize.py (a row per variant read through both), causes.py (why a row is not faster)

and beside them what every stage reads: cost.py (what runs should take: every assumption an estimate makes) and
epochs.py (the real data sets a workload stands for, their epochs). Imports go down only: running uses planning's
records and the statistics' rules, planning the statistics' rules, and records and statistics nothing of the others
(tests/test_layout.py)."""
