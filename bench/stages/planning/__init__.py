"""Planning a bench: what is asked, the data and model checks, its runs, fitted to the budget, kept in plan.json."""
