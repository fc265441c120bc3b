"""What a bench keeps: runs.csv, the saved baselines, --profile's operators."""
