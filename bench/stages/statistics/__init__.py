"""The statistics of a bench's rows: paired intervals, the rules of each row's answers, the summary, the causes."""
