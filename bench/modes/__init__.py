"""The modes: a plan, a way to do one run and a way to finish, each on the stages and outputs below it. speed.py is
the bench itself (the speed table); check.py --check; maxbatch.py --max-batch; accuracy.py --to-accuracy;
scaling.py --scaling. Each mode's flags live with it (add_flags, check_flags); cli.py chooses the mode."""
