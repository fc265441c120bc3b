"""The stages a bench goes through, in order: plan.py (the runs, all on the same work, in rounds, within the budget, in
four named steps: what is asked, prepare.py the data and model checks, the steps calibrated (calibrate.py on a GPU),
the plan; its records are planned.py's, its runs built by build.py, fitted to the budget by fit.py, kept in plan.json
by planfile.py; cost.py what they should take), execute.py (the one executor of every mode: rounds,
budget, chunks, resume, signals), launch.py (one run: its process tree under a time limit; slurm.py across nodes),
record.py (runs.csv, a whole row at a time; baseline.py the saved results compared against), intervals.py (the
statistics of paired rounds), rules.py (the rules each row's answers follow), summarize.py (a row per variant read
through both: numbers and answers only), causes.py (why a row is not faster) and profiles.py (each
technique's operators against the baseline's, from --profile)."""
