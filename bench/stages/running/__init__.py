"""Running a plan: the executor, one run's launch, a GPU's calibration."""
